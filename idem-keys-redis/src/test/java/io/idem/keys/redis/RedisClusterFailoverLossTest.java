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
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * What an acknowledged completion can lose when the master holding it is killed (SIGKILL) and its
 * replica takes over, with and without WAIT. {@value #KEYS} keys are acquired, the first half
 * completed, then the second half, each completion storing a {@value #RESPONSE_BYTES}-byte
 * response; then the master is killed and its replica takes over. In the "lagging" cases the
 * replica is stopped (SIGSTOP) before the second half and resumed only after the kill, as a replica
 * on a slow link or a busy host falls behind: Redis replication is asynchronous, so what the master
 * acknowledged but had not yet sent is lost. After the failover each acknowledged key is acquired
 * again, as a retry would: {@code Completed} kept it; {@code Acquired} lost it and the retry runs
 * the business step again; {@code InProgress} lost the completion but not the acquire (the retry
 * runs it again after the in-progress timeout). Prints a RESULT line per case (docs/KEYS.md, "On
 * Redis Cluster"). With WAIT 1 and one replica per master, nothing acknowledged may be lost.
 */
@Tag("slow")
@Tag("campaign")
@Timeout(600)
class RedisClusterFailoverLossTest {
  static final int KEYS = 2000;
  static final int RESPONSE_BYTES = 16 * 1024;
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration HOUR = Duration.ofHours(1);
  static final Fingerprint FP = Fingerprint.of("amount=10".getBytes(StandardCharsets.UTF_8));

  @TempDir Path dir;

  record Loss(int acknowledged, int lost, int reran, int stuck) {
    String line(String what) {
      return String.format(
          "RESULT redis-cluster kill -9 of the master, %s: %d of %d completions acknowledged,"
              + " %d of them lost (%d retries ran the business step again, %d held in progress)",
          what, acknowledged, KEYS, lost, reran, stuck);
    }
  }

  @Test
  void waitForOneReplicaLosesNoAcknowledgedCompletionAtAKilledMaster() throws Exception {
    try (RedisCluster cluster = RedisCluster.start(dir, RedisServer.Aof.OFF)) {
      Loss keepingUp = measure(cluster, "up", false, false);
      Loss lagging = measure(cluster, "lag", false, true);
      Loss waiting = measure(cluster, "wait", true, true);
      System.out.println(keepingUp.line("replica keeping up, no WAIT"));
      System.out.println(lagging.line("replica lagging, no WAIT"));
      System.out.println(waiting.line("replica lagging, WAIT 1"));
      assertThat(lagging.acknowledged()).isEqualTo(KEYS);
      assertThat(waiting.acknowledged()).isGreaterThanOrEqualTo(KEYS / 2);
      assertThat(waiting.lost()).isZero();
    }
  }

  static Loss measure(RedisCluster cluster, String prefix, boolean wait, boolean lag)
      throws Exception {
    RedisKeyStore.Builder b =
        RedisKeyStore.builder()
            .clusterUri(cluster.uris().toArray(String[]::new))
            .prefix(prefix)
            .timeout(Duration.ofSeconds(10));
    if (wait) {
      b.waitForReplicas(1, Duration.ofMillis(100));
    }
    try (RedisKeyStore store = b.build()) {
      int slot = RedisCluster.slotOf(store.hashTag());
      int master = cluster.masterOf(slot);
      int replica = cluster.replicasOf(master).get(0);
      List<IdempotencyKey> keys = new ArrayList<>();
      List<CompletableFuture<Acquisition>> acquires = new ArrayList<>();
      for (int i = 0; i < KEYS; i++) {
        IdempotencyKey k = new IdempotencyKey("loss", prefix + "-" + i);
        keys.add(k);
        acquires.add(store.acquire(k, FP, LONG, HOUR).toCompletableFuture());
      }
      CompletableFuture.allOf(acquires.toArray(CompletableFuture[]::new)).join();

      Set<IdempotencyKey> acknowledged = ConcurrentHashMap.newKeySet();
      byte[] response = new byte[RESPONSE_BYTES];
      Arrays.fill(response, (byte) 'p');
      List<CompletableFuture<Settlement>> firstHalf =
          complete(store, keys, acquires, 0, KEYS / 2, response, acknowledged);
      CompletableFuture.allOf(firstHalf.toArray(CompletableFuture[]::new)).join();
      if (lag) {
        cluster.pause(replica);
      }
      List<CompletableFuture<Settlement>> secondHalf;
      try {
        secondHalf = complete(store, keys, acquires, KEYS / 2, KEYS, response, acknowledged);
        // Without WAIT the second half is acknowledged at once; with it, its scripts wait in
        // vain for the stopped replica. Either way, the master dies with them.
        settle(secondHalf, Duration.ofSeconds(2));
        cluster.kill(master);
      } finally {
        if (lag) {
          cluster.resume(replica);
        }
      }
      settle(secondHalf, Duration.ofSeconds(30));
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

  private static List<CompletableFuture<Settlement>> complete(
      RedisKeyStore store,
      List<IdempotencyKey> keys,
      List<CompletableFuture<Acquisition>> acquires,
      int from,
      int to,
      byte[] response,
      Set<IdempotencyKey> acknowledged) {
    List<CompletableFuture<Settlement>> out = new ArrayList<>();
    for (int i = from; i < to; i++) {
      IdempotencyKey k = keys.get(i);
      long token = ((Acquisition.Acquired) acquires.get(i).join()).token();
      CompletableFuture<Settlement> c = store.complete(k, token, response).toCompletableFuture();
      c.whenComplete(
          (s, failure) -> {
            if (failure == null && s instanceof Settlement.Done) {
              acknowledged.add(k);
            }
          });
      out.add(c);
    }
    return out;
  }

  /** Waits up to {@code bound} for every stage to end, however it ends. */
  private static void settle(List<CompletableFuture<Settlement>> stages, Duration bound)
      throws InterruptedException {
    long end = System.nanoTime() + bound.toNanos();
    for (CompletableFuture<Settlement> c : stages) {
      long left = end - System.nanoTime();
      if (left <= 0) {
        return;
      }
      try {
        c.get(left, TimeUnit.NANOSECONDS);
      } catch (ExecutionException | TimeoutException e) {
        // an unknown outcome, or not yet: neither is counted as acknowledged
      }
    }
  }
}
