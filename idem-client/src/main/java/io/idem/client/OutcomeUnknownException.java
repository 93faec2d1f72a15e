package io.idem.client;

/**
 * The call was sent but its answer did not come before its deadline. It is applied at most once,
 * and it stays in the session: the client keeps resending it with its number until the server
 * answers, so it may still be applied after this exception. Read the state to find out, or retry an
 * operation that is safe to repeat.
 */
public final class OutcomeUnknownException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public OutcomeUnknownException(
      String message, long sessionId, long requestNumber, String leaderHint) {
    super(message, sessionId, requestNumber, leaderHint, null);
  }
}
