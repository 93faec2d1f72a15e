package io.idem.lab;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.redis.RedisEffect;
import io.idem.keys.redis.RedisKeyStore;
import io.lettuce.core.RedisClient;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * The Redis key store as a bench target ({@code idem bench --workload keys --store redis}): one
 * keyed operation acquires a key no one used before and completes it with a response, two Lua
 * scripts one after the other, as the Idem store's keyed operation is two commands. A "session" is
 * a {@link RedisKeyStore} with a connection of its own, all over one {@link RedisClient}: Lettuce's
 * model, one thread-safe connection that pipelines every caller's commands. With {@code ledger},
 * the completion also carries the business step's write, an {@code RPUSH} of the key's name to the
 * session's ledger list ({@link RedisEffect}, in the same script).
 */
final class RedisStoreTarget implements BenchTarget {
  private final List<RedisKeyStore> stores = new ArrayList<>();
  private final String run;
  private final Duration inProgress;
  private final Duration retention;
  private final byte[] response;
  private final boolean ledger;

  RedisStoreTarget(
      RedisClient client,
      int sessions,
      String run,
      Duration inProgress,
      Duration retention,
      int responseSize,
      boolean ledger) {
    this.run = run;
    this.inProgress = inProgress;
    this.retention = retention;
    this.response = new byte[responseSize];
    this.ledger = ledger;
    try {
      for (int i = 0; i < sessions; i++) {
        stores.add(RedisKeyStore.builder().client(client).prefix("bench").build());
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  @Override
  public String name() {
    return "redis";
  }

  @Override
  public CompletableFuture<?> op(int session, long n) {
    RedisKeyStore store = stores.get(session);
    IdempotencyKey key = new IdempotencyKey(BenchSettings.KEY_SCOPE, run + "-" + session + "-" + n);
    return BenchTarget.acquireThenComplete(
        store.acquire(key, Fingerprint.none(), inProgress, retention),
        token -> store.complete(key, token, response, effect(store, session, key)));
  }

  /** The ledger push, or null (none). */
  private RedisEffect effect(RedisKeyStore store, int session, IdempotencyKey key) {
    return ledger
        ? RedisEffect.push(
            store.hashTag() + ":ledger:" + session, key.key().getBytes(StandardCharsets.UTF_8))
        : null;
  }

  @Override
  public void close() {
    stores.forEach(RedisKeyStore::close); // the client stays the caller's
  }
}
