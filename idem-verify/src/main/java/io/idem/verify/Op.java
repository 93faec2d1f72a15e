package io.idem.verify;

/**
 * One client operation of a recorded history, from its invocation to its completion.
 *
 * @param id unique within the history
 * @param process the client (session) that issued it
 * @param f what it does
 * @param key the key it touches
 * @param value append: the (unique) element; incr: the delta; write: the value; cas: the new value;
 *     grant and renew: the lease's TTL in ms
 * @param expected cas only: the version it expects (the number of writes to the key so far)
 * @param seq the client's request number within its session (FIFO order), 0 if none
 * @param start when it was invoked (nanoseconds, one clock for the whole history)
 * @param end when its outcome was known, or {@link Long#MAX_VALUE} for an unknown outcome
 * @param outcome what the client learned
 * @param result incr: the counter after it; read: the value read (null when the key was absent);
 *     grant and renew: the lease's expiry (log ms); revoke: the log time it ended
 */
public record Op(
    long id,
    String process,
    Fn f,
    String key,
    long value,
    long expected,
    long seq,
    long start,
    long end,
    Outcome outcome,
    Long result) {

  /** The kinds of operation. */
  public enum Fn {
    APPEND,
    INCR,
    READ,
    WRITE,
    CAS,
    /** Grant a lease; the key is the lease name. */
    GRANT,
    /** Renew (keep alive) a lease. */
    RENEW,
    /** Revoke a lease. */
    REVOKE
  }

  /** What the client learned of an operation. */
  public enum Outcome {
    /** It took effect (once, if the system is right). */
    OK,
    /** It definitely did not take effect (for cas: the comparison failed). */
    FAIL,
    /** Unknown: a timeout, a crash, a lost session. It may have taken effect, at most once. */
    INFO
  }

  /** Validates the fields. */
  public Op {
    if (process == null || f == null || key == null || outcome == null) {
      throw new IllegalArgumentException("process, f, key and outcome are required");
    }
    if (end < start) {
      throw new IllegalArgumentException(
          "op " + id + " ends (" + end + ") before it starts (" + start + ")");
    }
    if (outcome == Outcome.INFO) {
      end = Long.MAX_VALUE;
    }
  }
}
