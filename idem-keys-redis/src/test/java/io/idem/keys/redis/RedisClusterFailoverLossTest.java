package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.stores.RedisCluster;
import io.idem.testkit.stores.RedisServer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What an acknowledged completion can lose when the master holding it is killed (SIGKILL) and its
 * replica takes over, with and without WAIT: {@value #TOTAL} completions stream in, the master is
 * killed once {@value #ACKED} are acknowledged, and after the failover each acknowledged key is
 * acquired again, as a retry would: {@code Completed} kept it; {@code Acquired} lost it, and the
 * retry runs the business step again; {@code InProgress} lost the completion but not the acquire
 * (the retry runs it again after the in-progress timeout). Prints a RESULT line per case
 * (docs/KEYS.md, "On Redis Cluster"). With WAIT 1 and one replica per master nothing acknowledged
 * may be lost.
 */
@Timeout(600)
class RedisClusterFailoverLossTest {
  static final int TOTAL = 6000;
  static final int ACKED = 2000;
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration HOUR = Duration.ofHours(1);
  static final Fingerprint FP = Fingerprint.of("amount=10".getBytes(StandardCharsets.UTF_8));

  @TempDir Path dir;

  record Loss(int acknowledged, int lost, int reran, int stuck) {}

  @Test
  void waitForOneReplicaLosesNoAcknowledgedCompletionAtAKilledMaster() throws Exception {
    try (RedisCluster cluster = RedisCluster.start(dir, RedisServer.Aof.OFF)) {
      Loss without = measure(cluster, "nowait", false);
      Loss with = measure(cluster, "wait", true);
      System.out.printf(
          "RESULT redis-cluster kill -9 of the master, no WAIT: %d acknowledged, %d lost"
              + " (%d retries ran the business step again, %d held in progress)%n",
          without.acknowledged(), without.lost(), without.reran(), without.stuck());
      System.out.printf(
          "RESULT redis-cluster kill -9 of the master, WAIT 1: %d acknowledged, %d lost"
              + " (%d retries ran the business step again, %d held in progress)%n",
          with.acknowledged(), with.lost(), with.reran(), with.stuck());
      assertThat(without.acknowledged()).isGreaterThanOrEqualTo(ACKED);
      assertThat(with.acknowledged()).isGreaterThanOrEqualTo(ACKED);
      assertThat(with.lost()).isZero();
    }
  }

  static Loss measure(RedisCluster cluster, String prefix, boolean wait) throws Exception {
    RedisKeyStore.Builder b =
        RedisKeyStore.builder()
            .clusterUri(cluster.uris().toArray(String[]::new))
            .prefix(prefix)
            .timeout(Duration.ofSeconds(10));
    if (wait) {
      b.waitForReplicas(1, Duration.ofSeconds(2));
    }
    try (RedisKeyStore store = b.build()) {
      int slot = RedisCluster.slotOf(store.hashTag());
      List<IdempotencyKey> keys = new ArrayList<>();
      List<CompletableFuture<Acquisition>> acquires = new ArrayList<>();
      for (int i = 0; i < TOTAL; i++) {
        IdempotencyKey k = new IdempotencyKey("loss", prefix + "-" + i);
        keys.add(k);
        acquires.add(store.acquire(k, FP, LONG, HOUR).toCompletableFuture());
      }
      CompletableFuture.allOf(acquires.toArray(CompletableFuture[]::new)).join();

      Set<IdempotencyKey> acknowledged = ConcurrentHashMap.newKeySet();
      AtomicInteger acks = new AtomicInteger();
      CountDownLatch enough = new CountDownLatch(1);
      int master = cluster.masterOf(slot);
      List<CompletableFuture<Settlement>> completions = new ArrayList<>();
      for (int i = 0; i < TOTAL; i++) {
        IdempotencyKey k = keys.get(i);
        long token = ((Acquisition.Acquired) acquires.get(i).join()).token();
        CompletableFuture<Settlement> c =
            store.complete(k, token, "paid".getBytes(StandardCharsets.UTF_8)).toCompletableFuture();
        c.whenComplete(
            (s, failure) -> {
              if (failure == null && s instanceof Settlement.Done) {
                acknowledged.add(k);
                if (acks.incrementAndGet() == ACKED) {
                  enough.countDown();
                }
              }
            });
        completions.add(c);
      }
      assertThat(enough.await(60, TimeUnit.SECONDS)).isTrue();
      cluster.kill(master); // right after the ACKED-th acknowledgement, completions still flowing
      for (CompletableFuture<Settlement> c : completions) {
        try {
          c.join();
        } catch (RuntimeException e) {
          // the outcome of those in flight at the kill is unknown: not counted
        }
      }
      cluster.awaitHealthy();
      // Back as the new master's replica, after a full sync from it: it brings nothing back, and
      // WAIT 1 has a replica again.
      cluster.restart(master);
      int lost = 0;
      int reran = 0;
      int stuck = 0;
      for (IdempotencyKey k : acknowledged) {
        Acquisition again =
            RedisClusterKeyStoreTest.eventually(
                () -> store.acquire(k, FP, LONG, HOUR).toCompletableFuture().join());
        if (again instanceof Acquisition.Acquired) {
          lost++;
          reran++;
        } else if (again instanceof Acquisition.InProgress) {
          lost++;
          stuck++;
        }
      }
      return new Loss(acknowledged.size(), lost, reran, stuck);
    }
  }
}
