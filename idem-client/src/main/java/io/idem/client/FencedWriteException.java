package io.idem.client;

/**
 * A fenced write ({@link IdemClient#fenced}) was refused, {@code FENCED_WRITE}: the fence's key is
 * no longer held under the fence's token (another owner took it over, or it was released or
 * expired). The write was not applied. The writer is a stale owner: it must stop, not retry.
 */
public final class FencedWriteException extends RejectedException {
  private static final long serialVersionUID = 1L;
  private final long currentToken;

  /** For the client and its tests; applications only catch it. */
  public FencedWriteException(
      String message, long currentToken, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
    this.currentToken = currentToken;
  }

  /** The key's current token, 0 if it has no record. */
  public long currentToken() {
    return currentToken;
  }
}
