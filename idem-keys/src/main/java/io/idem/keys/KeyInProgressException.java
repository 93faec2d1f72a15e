package io.idem.keys;

import java.time.Duration;
import org.jspecify.annotations.Nullable;

/**
 * Another owner holds the key (its deadline has not passed), and the caller chose not to wait, or
 * waited its bound. Retry after {@link #retryAfter()}.
 */
public final class KeyInProgressException extends KeyException {
  private static final long serialVersionUID = 1L;

  private final Duration retryAfter;

  /** With the key, what happened, and the cause if any; no estimate of when to retry. */
  public KeyInProgressException(
      @Nullable IdempotencyKey key, String message, @Nullable Throwable cause) {
    this(key, message, cause, Duration.ZERO);
  }

  /**
   * With the key, what happened, the cause if any, and how long until the owner's deadline passes
   * (an estimate; zero if unknown).
   */
  public KeyInProgressException(
      @Nullable IdempotencyKey key,
      String message,
      @Nullable Throwable cause,
      @Nullable Duration retryAfter) {
    super(key, message, cause);
    this.retryAfter = retryAfter == null || retryAfter.isNegative() ? Duration.ZERO : retryAfter;
  }

  /**
   * How long until the owner's deadline passes, estimated from the store's deadline and this
   * machine's clock: by then the owner has completed, released or lost the key. Zero if unknown.
   */
  public Duration retryAfter() {
    return retryAfter;
  }
}
