package io.idem.keys;

import org.jspecify.annotations.Nullable;

/**
 * Root of the keys library's exceptions; each subtype says what the caller should do. Every one
 * carries the key it is about.
 */
public abstract sealed class KeyException extends RuntimeException
    permits KeyStoreException,
        KeyStoreFullException,
        KeyInProgressException,
        KeyMismatchException,
        KeyFencedException,
        StoredFailureException {
  private static final long serialVersionUID = 1L;

  private final transient @Nullable IdempotencyKey key;

  KeyException(@Nullable IdempotencyKey key, String message, @Nullable Throwable cause) {
    super(key == null ? message : message + " [" + key.scope() + "/" + key.key() + "]", cause);
    this.key = key;
  }

  /** The key; null only when the error concerns no key. */
  public @Nullable IdempotencyKey key() {
    return key;
  }
}
