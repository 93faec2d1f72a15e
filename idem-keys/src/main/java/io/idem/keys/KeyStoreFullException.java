package io.idem.keys;

import org.jspecify.annotations.Nullable;

/**
 * The store refused to add or grow a record because a bound is reached: the caller's quota ({@link
 * #quota()}: on Idem, the principal's {@code key_records} or {@code key_bytes}), or the store's
 * space (the Idem cluster's backend budget, Redis {@code maxmemory}). Nothing was applied; retrying
 * with the same key is safe and succeeds once records expire or an operator raises the bound.
 */
public final class KeyStoreFullException extends KeyException {
  private static final long serialVersionUID = 1L;

  private final boolean quota;

  /**
   * With the key, what happened, whether a quota (not the store's space) refused, and the cause.
   */
  public KeyStoreFullException(
      @Nullable IdempotencyKey key, String message, boolean quota, @Nullable Throwable cause) {
    super(key, message, cause);
    this.quota = quota;
  }

  /** Whether the caller's quota refused (true) or the store is out of space (false). */
  public boolean quota() {
    return quota;
  }
}
