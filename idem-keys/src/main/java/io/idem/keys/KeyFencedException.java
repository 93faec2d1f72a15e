package io.idem.keys;

/**
 * The operation ran, but before its outcome was stored another owner took the key over (this owner
 * was past its deadline): the outcome was not stored, and writes the operation fenced with its
 * token were refused by the store.
 */
public final class KeyFencedException extends KeyException {
  private static final long serialVersionUID = 1L;

  /** With the key, what happened, and the cause if any. */
  public KeyFencedException(IdempotencyKey key, String message, Throwable cause) {
    super(key, message, cause);
  }
}
