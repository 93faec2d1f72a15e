package io.idem.keys.redis.seed001;

import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.function.LongSupplier;

/**
 * <b>The broken baseline, on purpose.</b> Seed 001's {@code TryAcquire}/{@code Confirm} on Redis,
 * implemented exactly as the seed writes them, defects included: a negative control for tests, the
 * keys campaign and the bench. It is not part of the library and must never guard a real operation:
 * use {@link io.idem.keys.redis.RedisKeyStore} with {@link io.idem.keys.IdempotentExecutor}.
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
 * that ran but did not confirm before its deadline is run again. Thread-safe as its connection is;
 * the caller owns the connection.
 */
public final class Seed001 {

  /** The seed's {@code EX 86400}: a key lives a day. */
  public static final long EXPIRE_SECONDS = 86_400;

  /** The seed's Confirmed state. */
  public static final String CONFIRMED = "-1";

  private final RedisCommands<String, String> redis;
  private final LongSupplier nowMs;

  /**
   * Over {@code connection}, with {@code nowMs} as the seed's {@code now} (the application host's
   * clock, in milliseconds; the seed gives no unit).
   */
  public Seed001(StatefulRedisConnection<String, String> connection, LongSupplier nowMs) {
    this.redis = connection.sync();
    this.nowMs = nowMs;
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
    try {
      long now = nowMs.getAsLong();
      String set =
          redis.set(id, Long.toString(now + timeoutMs), SetArgs.Builder.nx().ex(EXPIRE_SECONDS));
      if ("OK".equals(set)) {
        return true; // 1.1
      }
      String reply = redis.get(id);
      if (CONFIRMED.equals(reply)) {
        return false; // 1.2.1
      }
      long deadline = Long.parseLong(reply); // a key gone since the SET: an error, so true below
      if (now < deadline) {
        return false; // 1.2.2
      }
      long delta = now + timeoutMs - deadline; // 1.2.3
      long updated = redis.incrby(id, delta);
      if (updated == deadline + delta) {
        return true;
      }
      redis.decrby(id, delta);
      return false;
    } catch (RuntimeException e) {
      return true; // the seed: "redis error: TryAcquire returns true"
    }
  }

  /**
   * The seed's {@code Confirm}: {@code SET id -1 XX}. It has no result in the seed, so an error is
   * not reported (the id stays acquired until its deadline, and is then run again).
   */
  public void confirm(String id) {
    try {
      redis.set(id, CONFIRMED, SetArgs.Builder.xx());
    } catch (RuntimeException e) {
      // As written: Confirm returns nothing.
    }
  }
}
