package io.idem.client;

/**
 * The session was lost (expired) while this call was in flight: it was applied at most once, and
 * the client cannot learn whether. New calls run in a new session.
 */
public class OutcomeUnknownException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public OutcomeUnknownException(String message) {
    super(message);
  }
}
