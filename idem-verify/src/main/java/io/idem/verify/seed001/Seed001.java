package io.idem.verify.seed001;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * <b>The broken baseline, on purpose.</b> Seed 001's {@code TryAcquire}/{@code Confirm} on Redis,
 * implemented exactly as the seed writes them, defects included: the negative control of the keys
 * campaign ({@code idem verify --workload keys --store seed001}), of the bench ({@code idem bench
 * --workload keys --store seed001}) and of {@code Seed001DefectsTest}. It lives in idem-verify, not
 * in any library module, and must never guard a real operation: use {@code
 * io.idem.keys.redis.RedisKeyStore} with {@code io.idem.keys.IdempotentExecutor}.
 *
 * <p>The seed's algorithm (value {@code -1} is Confirmed, any other value the owner's deadline):
 *
 * <pre>
 * TryAcquire(id, timeout):
 *   SET id (now+timeout) EX 86400 NX        -- OK: true (1.1)
 *   reply = GET id
 *   reply == Confirmed (-1): false          (1.2.1)
 *   now &lt; reply: false                      (1.2.2)
 *   delta = now + timeout - reply           (1.2.3)
 *   INCRBY id delta == reply + delta: true, else DECRBY id delta and false
 *   a Redis error: true                     ("redis 错误 TryAcquire 直接返回 true")
 * Confirm(id): SET id -1 XX
 * </pre>
 *
 * <p>Its defects, which the tests and the campaign must catch: a Redis error answers true, so a
 * retry during an outage runs the operation again; {@code now} is the application host's clock; an
 * owner stalled past its deadline is taken over and both run (no token, no renewal); and an owner
 * that ran but did not confirm before its deadline is run again.
 *
 * <p>The commands go out asynchronously, one after the other as the seed orders them, so that the
 * bench can drive it in the same closed loops as the stores; {@link #tryAcquire} and {@link
 * #confirm} wait for the asynchronous forms. Each command is bounded by the connection's timeout
 * (past it, an error: true). Thread-safe as its connection is; the caller owns the connection.
 */
public final class Seed001 {

  /** The seed's {@code EX 86400}: a key lives a day. */
  public static final long EXPIRE_SECONDS = 86_400;

  /** The seed's Confirmed state. */
  public static final String CONFIRMED = "-1";

  private final RedisAsyncCommands<String, String> redis;
  private final LongSupplier nowMs;
  private final Duration timeout;

  /**
   * Over {@code connection}, with {@code nowMs} as the seed's {@code now} (the application host's
   * clock, in milliseconds; the seed gives no unit).
   */
  public Seed001(StatefulRedisConnection<String, String> connection, LongSupplier nowMs) {
    this.redis = connection.async();
    this.nowMs = nowMs;
    this.timeout = connection.getTimeout();
  }

  /** Over {@code connection}, on this host's wall clock. */
  public Seed001(StatefulRedisConnection<String, String> connection) {
    this(connection, System::currentTimeMillis);
  }

  /**
   * The seed's {@code TryAcquire}: true means "run the business step, then {@link #confirm}".
   *
   * @param timeoutMs how long the caller may take before another may take the id over
   */
  public boolean tryAcquire(String id, long timeoutMs) {
    return tryAcquireAsync(id, timeoutMs).join();
  }

  /** {@link #tryAcquire}, without waiting: the answer completes on Lettuce's I/O thread. */
  public CompletableFuture<Boolean> tryAcquireAsync(String id, long timeoutMs) {
    long now = nowMs.getAsLong();
    return bounded(
            redis.set(id, Long.toString(now + timeoutMs), SetArgs.Builder.nx().ex(EXPIRE_SECONDS)))
        .thenCompose(
            set -> {
              if ("OK".equals(set)) {
                return CompletableFuture.completedFuture(true); // 1.1
              }
              return bounded(redis.get(id))
                  .thenCompose(
                      reply -> {
                        if (CONFIRMED.equals(reply)) {
                          return CompletableFuture.completedFuture(false); // 1.2.1
                        }
                        // A key gone since the SET: a null reply, an error, so true below.
                        long deadline = Long.parseLong(reply);
                        if (now < deadline) {
                          return CompletableFuture.completedFuture(false); // 1.2.2
                        }
                        long delta = now + timeoutMs - deadline; // 1.2.3
                        return bounded(redis.incrby(id, delta))
                            .thenCompose(
                                updated -> {
                                  if (updated == deadline + delta) {
                                    return CompletableFuture.completedFuture(true);
                                  }
                                  return bounded(redis.decrby(id, delta)).thenApply(d -> false);
                                });
                      });
            })
        .exceptionally(e -> true); // the seed: "redis error: TryAcquire returns true"
  }

  /**
   * The seed's {@code Confirm}: {@code SET id -1 XX}. It has no result in the seed, so an error is
   * not reported (the id stays acquired until its deadline, and is then run again).
   */
  public void confirm(String id) {
    confirmAsync(id).join();
  }

  /** {@link #confirm}, without waiting; never completes exceptionally. */
  public CompletableFuture<Void> confirmAsync(String id) {
    return bounded(redis.set(id, CONFIRMED, SetArgs.Builder.xx()))
        .handle((ok, e) -> null); // as written: Confirm returns nothing
  }

  private <T> CompletableFuture<T> bounded(RedisFuture<T> f) {
    return f.toCompletableFuture().orTimeout(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }
}
