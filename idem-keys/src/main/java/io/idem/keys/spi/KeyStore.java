package io.idem.keys.spi;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * Where key records live: Idem itself, Redis or PostgreSQL, one module each. A store is what makes
 * the executor correct, so its contract is strict:
 *
 * <ul>
 *   <li>Each operation is one atomic step on the store, decided by the store's own clock (log time,
 *       Redis {@code TIME}, PostgreSQL {@code now()}), never the caller's.
 *   <li>Tokens are strictly increasing per key, across takeovers, failovers and restarts.
 *   <li>A store error is never a yes: the stage completes exceptionally with {@link
 *       KeyStoreException} (outcome unknown), never with {@link Acquisition.Acquired} by default.
 *       Retrying with the same key must be safe.
 *   <li>Implementations are thread-safe and must not block the calling thread for long.
 * </ul>
 *
 * @param <E> the effects the store applies together with a completion ({@link #completeWith}): on
 *     Idem {@code io.idem.client.Write}, on Redis {@code io.idem.keys.redis.RedisEffect}; {@link
 *     NoEffect} for a store without effects. An executor over the store takes operations that hand
 *     back this type only, so an effect of another store does not compile.
 */
public interface KeyStore<E> {

  /**
   * Acquires {@code key} for {@code inProgressTimeout}, or answers what holds it. The record is
   * kept for {@code retention} after it completes (or after its owner's deadline).
   */
  CompletionStage<Acquisition> acquire(
      IdempotencyKey key, Fingerprint fingerprint, Duration inProgressTimeout, Duration retention);

  /**
   * Stores {@code response} as the key's outcome if {@code token} still owns it. On a completed
   * key, this, {@link #release} and {@link #renew} answer {@link Settlement.Completed} with the
   * stored outcome; on a key another owner took over or that is gone, {@link Settlement.Fenced}.
   */
  CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response);

  /**
   * Stores {@code response} as the key's outcome and applies {@code effect}, the business step's
   * deciding write in this store's own terms, in the same atomic step: both or neither. This closes
   * seed 001's second defect (an owner that made its write and died before completing lets a
   * takeover owner make it again).
   *
   * <p>An effect the store refuses (a failed compare-and-set, or, through an unchecked cast, an
   * object not of {@link #effectType}) fails the stage with an exception other than {@link
   * KeyStoreException}, applies nothing and leaves the key owned. The default, for stores without
   * effects, fails the stage with {@link UnsupportedOperationException}, and {@code effect == null}
   * is a plain {@link #complete}.
   */
  default CompletionStage<Settlement> completeWith(
      IdempotencyKey key, long token, byte[] response, E effect) {
    if (effect == null) {
      return complete(key, token, response);
    }
    return CompletableFuture.failedFuture(
        new UnsupportedOperationException(
            getClass().getName() + " cannot apply an effect with a completion"));
  }

  /**
   * The class of {@code E}, for callers that hold effects untyped (a servlet request attribute) to
   * check one before handing it over. Default {@link NoEffect}.
   */
  default Class<?> effectType() {
    return NoEffect.class;
  }

  /** Drops the key if {@code token} still owns it: the business step failed and did nothing. */
  CompletionStage<Settlement> release(IdempotencyKey key, long token);

  /** Moves the owner's deadline to now + {@code extension} if {@code token} still owns it. */
  CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension);
}
