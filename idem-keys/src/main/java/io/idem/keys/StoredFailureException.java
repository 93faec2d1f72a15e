package io.idem.keys;

import org.jspecify.annotations.Nullable;

/**
 * The replay of a business failure that was stored as the key's final outcome (its type was chosen
 * with {@link IdempotentExecutor.Builder#storeFailures}): the same request fails the same way
 * again, without running. {@link #failureType()} and {@link #getMessage()} are the original's.
 */
public final class StoredFailureException extends KeyException {
  private static final long serialVersionUID = 1L;

  private final String failureType;

  /** A stored failure of type {@code failureType} with its message. */
  public StoredFailureException(@Nullable IdempotencyKey key, String failureType, String message) {
    super(key, failureType + ": " + message, null);
    this.failureType = failureType;
  }

  /** The class name of the original failure. */
  public String failureType() {
    return failureType;
  }
}
