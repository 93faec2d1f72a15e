package io.idem.verify.seed001;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyStoreException;
import io.idem.keys.redis.RedisKeyStore;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Seed 001's defects, shown deterministically on a real redis-server, next to {@link RedisKeyStore}
 * under the same scenario: the seed debits twice, the store once.
 */
@Timeout(120)
class Seed001DefectsTest {
  static final Fingerprint FP = Fingerprint.of(new byte[] {10});
  static final IdempotentExecutor.Codec<String> TEXT = IdempotentExecutor.Codec.utf8();

  @TempDir Path dir;

  /** The seed's caller: try, debit, confirm. */
  static void deliver(Seed001 seed, String id, long timeoutMs, Runnable debit) {
    if (seed.tryAcquire(id, timeoutMs)) {
      debit.run();
      seed.confirm(id);
    }
  }

  @Test
  void aRedisOutageMakesTheSeedDebitARetryAgainWhileTheStoreRefusesAndLaterReplays()
      throws Exception {
    AtomicInteger seedDebits = new AtomicInteger();
    AtomicInteger storeDebits = new AtomicInteger();
    IdempotencyKey key = new IdempotencyKey("shop", "payment-1");
    try (RedisServer redis = RedisServer.start(dir, RedisServer.Aof.ALWAYS);
        Seed001Client seedClient = new Seed001Client(redis.uri());
        RedisKeyStore store =
            RedisKeyStore.builder().uri(redis.uri()).timeout(Duration.ofSeconds(2)).build();
        var ex = IdempotentExecutor.builder(store).build()) {
      Seed001 seed = seedClient.seed;
      IdempotentExecutor.Operation<String> debit = t -> "debited " + storeDebits.incrementAndGet();

      // Delivery 1: both run the payment once.
      deliver(seed, "payment-1", 10_000, seedDebits::incrementAndGet);
      assertThat(ex.execute(key, FP, TEXT, debit)).isEqualTo("debited 1");

      // Redis dies; the caller, who lost the answer, delivers again.
      redis.kill();
      deliver(seed, "payment-1", 10_000, seedDebits::incrementAndGet);
      assertThatThrownBy(() -> ex.execute(key, FP, TEXT, debit))
          .isInstanceOf(KeyStoreException.class);

      // Redis is back (its AOF fsync'ed every write): one more delivery.
      redis.restart();
      awaitUp(seed);
      deliver(seed, "payment-1", 10_000, seedDebits::incrementAndGet);
      assertThat(executeWhenUp(ex, key, debit)).isEqualTo("debited 1");

      assertThat(seedDebits).as("seed 001: the retry during the outage debited").hasValue(2);
      assertThat(storeDebits).as("RedisKeyStore: once, then replayed").hasValue(1);
    }
  }

  @Test
  void anOwnerStalledPastItsTimeoutIsTakenOverSoTheSeedDebitsTwiceWhileTheStoreRenews()
      throws Exception {
    AtomicInteger seedDebits = new AtomicInteger();
    AtomicInteger storeDebits = new AtomicInteger();
    IdempotencyKey key = new IdempotencyKey("shop", "payment-2");
    try (RedisServer redis = RedisServer.start(dir, RedisServer.Aof.OFF);
        Seed001Client seedClient = new Seed001Client(redis.uri());
        RedisKeyStore store = RedisKeyStore.builder().uri(redis.uri()).build();
        IdempotentExecutor<?> ex =
            IdempotentExecutor.builder(store)
                .inProgressTimeout(Duration.ofSeconds(1))
                .renewEvery(Duration.ofMillis(100))
                .waitForResult(Duration.ofSeconds(20))
                .build()) {
      Seed001 seed = seedClient.seed;
      // The first delivery's debit takes 2.5 s against a 1 s timeout; the retry comes 1.5 s after
      // the first delivery acquired.
      assertThat(seed.tryAcquire("payment-2", 1_000)).isTrue();
      CompletableFuture<Void> slowSeed =
          CompletableFuture.runAsync(
              () -> {
                sleep(2_500);
                seedDebits.incrementAndGet();
                seed.confirm("payment-2");
              });
      CountDownLatch owned = new CountDownLatch(1);
      CompletableFuture<String> slowStore =
          CompletableFuture.supplyAsync(
              () -> {
                try {
                  return ex.execute(
                      key,
                      FP,
                      TEXT,
                      t -> {
                        owned.countDown();
                        sleep(2_500);
                        return "debited " + storeDebits.incrementAndGet();
                      });
                } catch (Exception e) {
                  throw new IllegalStateException(e);
                }
              });
      assertThat(owned.await(30, TimeUnit.SECONDS)).isTrue();
      sleep(1_500);
      deliver(seed, "payment-2", 1_000, seedDebits::incrementAndGet);
      String retried = ex.execute(key, FP, TEXT, t -> "debited " + storeDebits.incrementAndGet());
      slowSeed.get(30, TimeUnit.SECONDS);
      assertThat(slowStore.get(30, TimeUnit.SECONDS)).isEqualTo("debited 1");
      assertThat(retried).isEqualTo("debited 1");
      assertThat(seedDebits).as("seed 001: taken over mid-debit, both debited").hasValue(2);
      assertThat(storeDebits).as("RedisKeyStore: renewed, the retry waited").hasValue(1);
    }
  }

  private static void awaitUp(Seed001 seed) {
    // tryAcquire cannot tell an outage from a yes, so ask a key of its own until Redis answers
    // false (the key exists once a SET landed).
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (seed.tryAcquire("probe", 60_000) && System.nanoTime() < end) {
      sleep(50);
    }
  }

  private static String executeWhenUp(
      IdempotentExecutor<?> ex, IdempotencyKey key, IdempotentExecutor.Operation<String> op)
      throws Exception {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        return ex.execute(key, FP, TEXT, op);
      } catch (KeyStoreException e) {
        if (System.nanoTime() > end) {
          throw e;
        }
        sleep(50);
      }
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** A Lettuce client and connection for the seed, failing fast while disconnected. */
  static final class Seed001Client implements AutoCloseable {
    final RedisClient client;
    final StatefulRedisConnection<String, String> connection;
    final Seed001 seed;

    Seed001Client(String uri) {
      client =
          RedisClient.create(
              RedisURI.builder(RedisURI.create(uri)).withTimeout(Duration.ofSeconds(2)).build());
      client.setOptions(
          ClientOptions.builder()
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .build());
      connection = client.connect();
      seed = new Seed001(connection);
    }

    @Override
    public void close() {
      connection.close();
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }
}
