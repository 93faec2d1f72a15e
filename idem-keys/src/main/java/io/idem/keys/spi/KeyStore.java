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
 */
public interface KeyStore {

  /**
   * Acquires {@code key} for {@code inProgressTimeout}, or answers what holds it. The record is
   * kept for {@code retention} after it completes (or after its owner's deadline).
   */
  CompletionStage<Acquisition> acquire(
      IdempotencyKey key, Fingerprint fingerprint, Duration inProgressTimeout, Duration retention);

  /** Stores {@code response} as the key's outcome if {@code token} still owns it. */
  CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response);

  /**
   * Stores {@code response} as the key's outcome and applies {@code effect}, the business step's
   * deciding write in this store's own terms, in the same atomic step: both or neither. This closes
   * seed 001's second defect (an owner that made its write and died before completing lets a
   * takeover owner make it again). A store that can do this names the effect types it takes (the
   * Idem store: {@code io.idem.client.Write}); a PostgreSQL store could take work for the same
   * transaction, a Redis store commands for the same script.
   *
   * <p>An effect the store refuses (a failed compare-and-set, an effect of a type it does not take)
   * fails the stage with an exception other than {@link KeyStoreException}, applies nothing and
   * leaves the key owned. The default, for stores without effects, fails the stage with {@link
   * UnsupportedOperationException}, and {@code effect == null} is a plain {@link #complete}.
   */
  default CompletionStage<Settlement> completeWith(
      IdempotencyKey key, long token, byte[] response, Object effect) {
    if (effect == null) {
      return complete(key, token, response);
    }
    return CompletableFuture.failedFuture(
        new UnsupportedOperationException(
            getClass().getName() + " cannot apply an effect with a completion"));
  }

  /** Drops the key if {@code token} still owns it: the business step failed and did nothing. */
  CompletionStage<Settlement> release(IdempotencyKey key, long token);

  /** Moves the owner's deadline to now + {@code extension} if {@code token} still owns it. */
  CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension);
}
