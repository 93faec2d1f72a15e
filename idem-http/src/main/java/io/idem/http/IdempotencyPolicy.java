package io.idem.http;

import java.time.Duration;

/**
 * How one endpoint treats idempotency keys. Immutable; built by {@link #builder()}. The filter has
 * a default policy; a resolver (the Spring starter's {@code @Idempotent}) may give each endpoint
 * its own.
 *
 * @param keyRequired a request without a key gets 400; otherwise it runs as if there were no filter
 * @param waitForResult how long a duplicate of a request still in progress waits for its outcome
 *     (then replayed); zero answers 409 at once
 * @param storeServerErrors whether a 5xx response is stored and replayed (Stripe's choice) rather
 *     than releasing the key so that a retry runs again (the default)
 */
public record IdempotencyPolicy(
    boolean keyRequired, Duration waitForResult, boolean storeServerErrors) {

  /** Default {@link #waitForResult}: zero, a duplicate in progress gets 409 at once. */
  public static final Duration DEFAULT_WAIT_FOR_RESULT = Duration.ZERO;

  /** Longest {@link #waitForResult}: a waiting duplicate holds a server thread. */
  public static final Duration MAX_WAIT_FOR_RESULT = Duration.ofMinutes(5);

  /** Keys optional, no waiting, 5xx released. */
  public static final IdempotencyPolicy DEFAULTS =
      new IdempotencyPolicy(false, DEFAULT_WAIT_FOR_RESULT, false);

  /**
   * Validates.
   *
   * @throws IllegalArgumentException naming the bad value
   */
  public IdempotencyPolicy {
    if (waitForResult == null
        || waitForResult.isNegative()
        || waitForResult.compareTo(MAX_WAIT_FOR_RESULT) > 0) {
      throw new IllegalArgumentException(
          "waitForResult must be in [0, " + MAX_WAIT_FOR_RESULT + "], got " + waitForResult);
    }
  }

  /** A builder starting from {@link #DEFAULTS}. */
  public static Builder builder() {
    return new Builder();
  }

  /** Builds an {@link IdempotencyPolicy}. Not thread-safe. */
  public static final class Builder {
    private boolean keyRequired = DEFAULTS.keyRequired;
    private Duration waitForResult = DEFAULTS.waitForResult;
    private boolean storeServerErrors = DEFAULTS.storeServerErrors;

    private Builder() {}

    /** A request without a key gets 400. Default false. */
    public Builder keyRequired(boolean required) {
      this.keyRequired = required;
      return this;
    }

    /** A duplicate in progress waits up to {@code d} (at most 5 min); zero answers 409. */
    public Builder waitForResult(Duration d) {
      this.waitForResult = d;
      return this;
    }

    /** 5xx responses are stored and replayed instead of releasing the key. Default false. */
    public Builder storeServerErrors(boolean store) {
      this.storeServerErrors = store;
      return this;
    }

    /** The policy. */
    public IdempotencyPolicy build() {
      return new IdempotencyPolicy(keyRequired, waitForResult, storeServerErrors);
    }
  }
}
