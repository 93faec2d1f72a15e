package io.idem.keys.redis;

import io.idem.keys.IdempotencyKey;

/**
 * Redis refused a completion's {@link RedisEffect} because of what its key holds ({@code
 * WRONGTYPE}, {@code INCRBY} of a value that is not an integer, or an overflow). A definite answer,
 * unlike {@link io.idem.keys.KeyStoreException}: the script wrote nothing, and the key is still in
 * progress under the caller's token. Fix the data or the effect, then complete again (with or
 * without an effect), or release the key.
 */
public final class RedisEffectRefusedException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final transient IdempotencyKey key;
  private final transient RedisEffect effect;

  /** With the key being completed, the effect, and Redis's error reply. */
  public RedisEffectRefusedException(IdempotencyKey key, RedisEffect effect, String redisError) {
    super(
        "Redis refused the completion's effect "
            + effect
            + ": "
            + redisError
            + "; nothing was written and the key is still in progress under the caller's token ["
            + key.scope()
            + "/"
            + key.key()
            + "]");
    this.key = key;
    this.effect = effect;
  }

  /** The key whose completion carried the effect. */
  public IdempotencyKey key() {
    return key;
  }

  /** The effect Redis refused. */
  public RedisEffect effect() {
    return effect;
  }
}
