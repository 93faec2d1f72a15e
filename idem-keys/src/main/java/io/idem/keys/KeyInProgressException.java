package io.idem.keys;

/**
 * Another owner holds the key (its deadline has not passed), and the caller chose not to wait, or
 * waited its bound. Retry later.
 */
public final class KeyInProgressException extends KeyException {
  private static final long serialVersionUID = 1L;

  /** With the key, what happened, and the cause if any. */
  public KeyInProgressException(IdempotencyKey key, String message, Throwable cause) {
    super(key, message, cause);
  }
}
