package io.idem.keys;

import org.jspecify.annotations.Nullable;

/**
 * The key was used before with another payload (another fingerprint): a client bug or a reused key.
 * Nothing ran.
 */
public final class KeyMismatchException extends KeyException {
  private static final long serialVersionUID = 1L;

  /** With the key, what happened, and the cause if any. */
  public KeyMismatchException(
      @Nullable IdempotencyKey key, String message, @Nullable Throwable cause) {
    super(key, message, cause);
  }
}
