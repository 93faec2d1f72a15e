package io.idem.verify;

import io.idem.testkit.stores.RedisServer;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * One private redis-server for a keys campaign on Redis ({@link RedisPayments}, {@link
 * Seed001Payments}): {@code appendfsync always}, so that what Redis acknowledged survives its
 * faults; fault: kill -9 of redis-server, restarted after 0.2-1 s on the same port and data
 * directory. Workers and checker reach it directly (no proxy).
 */
final class RedisServers implements PaymentStore.Servers {
  private final RedisServer redis;

  private RedisServers(RedisServer redis) {
    this.redis = redis;
  }

  /** Starts redis-server with its data in {@code dir}. */
  static RedisServers start(Path dir) {
    return new RedisServers(RedisServer.start(dir, RedisServer.Aof.ALWAYS));
  }

  @Override
  public String workerAddress() {
    return redis.uri();
  }

  @Override
  public String directAddress() {
    return redis.uri();
  }

  @Override
  public List<PaymentStore.Fault> faults() {
    return List.of(new PaymentStore.Fault("kill -9 redis-server", this::killAndRestart));
  }

  private boolean killAndRestart(Random random) throws InterruptedException {
    redis.kill();
    Thread.sleep(200 + random.nextInt(800));
    redis.restart();
    return true;
  }

  @Override
  public void close() {
    redis.close();
  }
}
