package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.stores.RedisCluster;
import io.idem.testkit.stores.RedisServer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store on a Redis Cluster under its faults: answers hold across CLUSTER FAILOVER, a slot move
 * and a kill -9 of the master (with WAIT 1), and WAIT never says yes without its replica.
 */
@Tag("slow")
@Timeout(600)
class RedisClusterFaultsTest {
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration HOUR = Duration.ofHours(1);
  static final Fingerprint FP = Fingerprint.of(utf8("amount=10"));

  @TempDir static Path dir;
  static RedisCluster cluster;
  final String scope = "faults-" + UUID.randomUUID();

  @BeforeAll
  static void start() {
    cluster = RedisCluster.start(dir, RedisServer.Aof.OFF);
  }

  @AfterAll
  static void stop() {
    cluster.close();
  }

  static RedisKeyStore clusterStore(String prefix, int waitReplicas) {
    RedisKeyStore.Builder b =
        RedisKeyStore.builder()
            .clusterUri(cluster.uris().toArray(String[]::new))
            .prefix(prefix)
            .timeout(Duration.ofSeconds(10));
    if (waitReplicas > 0) {
      b.waitForReplicas(waitReplicas, Duration.ofSeconds(2));
    }
    return b.build();
  }

  @Test
  void answersHoldAcrossAFailoverASlotMoveAndAKilledMaster() {
    try (RedisKeyStore s = clusterStore("moves", 1)) {
      int slot = RedisCluster.slotOf(s.hashTag());
      IdempotencyKey done = key("done-before");
      Acquisition.Acquired a = (Acquisition.Acquired) join(s.acquire(done, FP, LONG, HOUR));
      assertThat(join(s.complete(done, a.token(), utf8("paid")))).isEqualTo(new Settlement.Done(0));
      IdempotencyKey held = key("held-before");
      Acquisition.Acquired h = (Acquisition.Acquired) join(s.acquire(held, FP, LONG, HOUR));

      int master = cluster.masterOf(slot);
      cluster.failover(cluster.replicasOf(master).get(0));
      assertThat(eventually(() -> join(s.acquire(done, FP, LONG, HOUR))))
          .isEqualTo(new Acquisition.Completed(utf8("paid")));

      int target =
          cluster.masters().stream()
              .filter(m -> m != cluster.masterOf(slot))
              .findFirst()
              .orElseThrow();
      cluster.moveSlot(slot, target);
      assertThat(eventually(() -> join(s.acquire(done, FP, LONG, HOUR))))
          .isEqualTo(new Acquisition.Completed(utf8("paid")));

      // WAIT 1 acknowledged everything above: the replica that takes over has it all.
      int killed = cluster.killMasterOf(slot);
      cluster.restart(killed); // WAIT 1 needs a replica again
      assertThat(eventually(() -> join(s.acquire(done, FP, LONG, HOUR))))
          .isEqualTo(new Acquisition.Completed(utf8("paid")));
      Acquisition.Acquired later =
          eventually(() -> (Acquisition.Acquired) join(s.acquire(key("after"), FP, LONG, HOUR)));
      assertThat(later.token()).isGreaterThan(h.token());
      assertThat(join(s.complete(held, h.token(), utf8("late")))).isEqualTo(new Settlement.Done(0));
    }
  }

  @Test
  void withWaitACompletionWhoseReplicaIsGoneIsNeverAYes() {
    try (RedisKeyStore s = clusterStore("wait", 1)) {
      int slot = RedisCluster.slotOf(s.hashTag());
      IdempotencyKey k = key("no-replica");
      Acquisition.Acquired a = (Acquisition.Acquired) join(s.acquire(k, FP, LONG, HOUR));
      int master = cluster.masterOf(slot);
      int replica = cluster.replicasOf(master).get(0);
      cluster.kill(replica);
      try {
        assertThatThrownBy(() -> join(s.complete(k, a.token(), utf8("paid"))))
            .isInstanceOf(CompletionException.class)
            .hasCauseInstanceOf(KeyStoreException.class)
            .cause()
            .hasMessageContaining("0 replica(s) acknowledged");
      } finally {
        cluster.restart(replica);
      }
      // It ran on the master: the outcome was unknown, not a no.
      assertThat(eventually(() -> join(s.show(k))))
          .hasValueSatisfying(r -> assertThat(r.completed()).isTrue());
      // The replica is back: the same completion, resent, is a yes.
      assertThat(eventually(() -> join(s.complete(k, a.token(), utf8("paid")))))
          .isEqualTo(new Settlement.Done(0));
    }
  }

  IdempotencyKey key(String name) {
    return new IdempotencyKey(scope, name);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static <T> T join(java.util.concurrent.CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }

  static <T> T eventually(java.util.function.Supplier<T> op) {
    return RedisClusterKeyStoreTest.eventually(op);
  }
}
