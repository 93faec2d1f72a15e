package io.idem.keys.redis;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.spi.Acquisition;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * The Redis store's follow-up of acquires whose answer did not come (see {@link
 * RedisKeyStore#acquire}): such an acquire may still land, leaving the key held by an owner that
 * never runs. The attempt is sent again every store timeout, until Redis answers or its in-progress
 * timeout has passed; the script answers a resent attempt as it answered the first, and an
 * acquisition found this way is released. At most {@link RedisKeyStore#MAX_RECOVERIES} keys are
 * followed at once. Thread-safe.
 */
final class AcquireRecovery {
  /** How a recovered acquisition is given back: the store's release. */
  @FunctionalInterface
  interface Release {
    void release(IdempotencyKey key, long token);
  }

  private final ScriptBatcher batcher;
  private final Duration timeout;
  private final BooleanSupplier closed;
  private final Release release;
  private final AtomicInteger recovering = new AtomicInteger();

  /**
   * @param timeout the store's timeout: the pause before each resend, and each resend's bound
   * @param closed whether the store is closed (following then stops)
   */
  AcquireRecovery(
      ScriptBatcher batcher, Duration timeout, BooleanSupplier closed, Release release) {
    this.batcher = batcher;
    this.timeout = timeout;
    this.closed = closed;
    this.release = release;
  }

  /**
   * Follows {@code attempt}, an acquire of {@code key} that failed with {@code failure}, if its
   * outcome is unknown (a {@link KeyStoreException}: it may have landed) and fewer than {@link
   * RedisKeyStore#MAX_RECOVERIES} are followed: resends it until {@code untilNanos} (its
   * in-progress timeout) and releases what it acquired.
   */
  void follow(IdempotencyKey key, ScriptBatcher.Call attempt, Throwable failure, long untilNanos) {
    if (!unknownOutcome(failure)) {
      return;
    }
    if (recovering.incrementAndGet() <= RedisKeyStore.MAX_RECOVERIES) {
      recoverLater(key, attempt, untilNanos);
    } else {
      recovering.decrementAndGet(); // the key waits out its in-progress timeout
    }
  }

  private static boolean unknownOutcome(Throwable failure) {
    Throwable t = failure;
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t instanceof KeyStoreException;
  }

  /**
   * Resends {@code attempt} after a timeout, releasing what it acquired; again on failure until
   * {@code untilNanos}, when any acquisition it made has passed its deadline anyway.
   */
  private void recoverLater(IdempotencyKey key, ScriptBatcher.Call attempt, long untilNanos) {
    CompletableFuture.delayedExecutor(timeout.toNanos(), TimeUnit.NANOSECONDS)
        .execute(
            () -> {
              if (closed.getAsBoolean() || System.nanoTime() - untilNanos > 0) {
                recovering.decrementAndGet();
                return;
              }
              CompletableFuture<List<Object>> resent;
              try {
                resent =
                    batcher
                        .submit(attempt.again())
                        .orTimeout(timeout.toNanos(), TimeUnit.NANOSECONDS);
              } catch (RuntimeException e) {
                resent = CompletableFuture.failedFuture(e);
              }
              resent.whenComplete(
                  (reply, failure) -> {
                    Acquisition a = null;
                    if (failure == null) {
                      try {
                        a = ScriptCodec.acquisition(reply);
                      } catch (RuntimeException e) {
                        failure = e;
                      }
                    }
                    if (failure != null) {
                      recoverLater(key, attempt, untilNanos);
                      return;
                    }
                    recovering.decrementAndGet();
                    if (a instanceof Acquisition.Acquired owned) {
                      release.release(key, owned.token());
                    }
                  });
            });
  }
}
