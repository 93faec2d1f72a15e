package io.idem.client;

/**
 * A fenced write ({@link IdemClient#fenced}) was refused, {@code FENCED_WRITE}: when the write
 * reached the log, the fence's key was not held under the fence's token. Either the key's record
 * has another token (another owner took it over; {@link #currentToken()} is greater), or it has no
 * record (released or expired; 0), or, from log format 8, the record still has the fence's token
 * but the log time had passed its owner's deadline ({@link #currentToken()} is the fence's own
 * token; nobody took the key over yet, but anyone may now). The write was not applied. The writer
 * is a stale owner: it must stop, not retry the write; it may acquire the key again, which replays
 * a completed answer or makes it the owner under a new token.
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

  /**
   * The key's current token, 0 if it has no record; the fence's own token if only the owner's
   * deadline had passed.
   */
  public long currentToken() {
    return currentToken;
  }
}
