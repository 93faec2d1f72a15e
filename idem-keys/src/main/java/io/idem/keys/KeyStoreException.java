package io.idem.keys;

import org.jspecify.annotations.Nullable;

/**
 * The store failed or did not answer: the outcome of the step is unknown (an acquire may have
 * landed). Retrying with the same key is safe: an acquire that landed answers in progress or
 * replays, never a second owner.
 */
public final class KeyStoreException extends KeyException {
  private static final long serialVersionUID = 1L;

  /** With the key, what happened, and the cause if any. */
  public KeyStoreException(
      @Nullable IdempotencyKey key, String message, @Nullable Throwable cause) {
    super(key, message, cause);
  }
}
