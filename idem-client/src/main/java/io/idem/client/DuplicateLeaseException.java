package io.idem.client;

/**
 * The lease is held: a definite answer. A retried grant of one's own lease never gets this; it gets
 * the original success.
 */
public class DuplicateLeaseException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public DuplicateLeaseException(String message) {
    super(message);
  }
}
