package io.idem.verify;

/**
 * Something a checker found wrong.
 *
 * @param kind what kind of wrong
 * @param key the key it concerns
 * @param detail the evidence, in words
 */
public record Violation(Kind kind, String key, String detail) {

  /** The kinds of violation. */
  public enum Kind {
    /** An element appears more than once, or a counter grew beyond what was sent. */
    DUPLICATE,
    /** An acknowledged operation is missing. */
    LOST,
    /** An operation that definitely failed took effect. */
    FAILED_BUT_APPLIED,
    /** An element nobody appended. */
    PHANTOM,
    /** A session's operations took effect out of their issue order. */
    FIFO,
    /** No order of the operations explains what the clients saw. */
    NOT_LINEARIZABLE,
    /** Replicas ended in different states. */
    DIVERGENCE,
    /** Two holders of one lease at overlapping times. */
    LEASE,
    /** A write carrying a stale owner's fencing token landed (or, unfenced, a stale owner's). */
    STALE_WRITE
  }

  @Override
  public String toString() {
    return kind + " on " + key + ": " + detail;
  }
}
