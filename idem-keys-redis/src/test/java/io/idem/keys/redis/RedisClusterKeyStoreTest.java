package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.contract.KeyStoreContract;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.stores.RedisCluster;
import io.idem.testkit.stores.RedisServer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store contract on a real Redis Cluster (six redis-server processes, {@link RedisCluster}),
 * and what the cluster adds: a namespace in one slot, effects refused outside it before anything
 * runs, and a cluster with replicas passing the durability check. Faults: {@link
 * RedisClusterFaultsTest}.
 */
@Timeout(600)
class RedisClusterKeyStoreTest extends KeyStoreContract {
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration HOUR = Duration.ofHours(1);
  static final Fingerprint FP = Fingerprint.of(utf8("amount=10"));

  @TempDir static Path dir;
  static RedisCluster cluster;
  static RedisKeyStore store;
  static RedisCluster goneCluster;
  static RedisKeyStore lost;

  @BeforeAll
  static void start() {
    cluster = RedisCluster.start(dir.resolve("main"), RedisServer.Aof.OFF);
    store = clusterStore("contract", 0);
    // A store whose whole cluster was killed after it connected: every call fails, none says yes.
    goneCluster = RedisCluster.start(dir.resolve("gone"), RedisServer.Aof.OFF);
    lost =
        RedisKeyStore.builder()
            .clusterUri(goneCluster.uris().toArray(String[]::new))
            .timeout(Duration.ofSeconds(2))
            .build();
    for (int port : goneCluster.ports()) {
      goneCluster.kill(port);
    }
  }

  @AfterAll
  static void stop() {
    lost.close();
    store.close();
    goneCluster.close();
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

  @Override
  protected KeyStore<?> store() {
    return store;
  }

  @Override
  protected KeyStore<?> unreachableStore() {
    return lost;
  }

  @Test
  void aNamespaceLivesInOneSlotOnOneMaster() {
    IdempotencyKey k = key("where");
    join(store.acquire(k, FP, LONG, HOUR));
    String record = new String(store.recordKey(k), StandardCharsets.UTF_8);
    int slot = RedisCluster.slotOf(record);
    assertThat(slot).isEqualTo(RedisCluster.slotOf(store.hashTag() + ":token"));
    int master = cluster.masterOf(slot);
    assertThat(cluster.command(master, "EXISTS", record)).isEqualTo("1");
    assertThat(cluster.command(master, "EXISTS", store.hashTag() + ":token")).isEqualTo("1");
  }

  @Test
  void anEffectOutsideTheRecordsSlotIsRefusedBeforeAnythingRuns() {
    IdempotencyKey k = key("cross-slot");
    Acquisition.Acquired a = (Acquisition.Acquired) join(store.acquire(k, FP, LONG, HOUR));
    String elsewhere = "{ledger}:payments";
    assertThat(RedisCluster.slotOf(elsewhere)).isNotEqualTo(RedisCluster.slotOf(store.hashTag()));
    assertThatThrownBy(
            () ->
                join(
                    store.complete(
                        k, a.token(), utf8("paid"), RedisEffect.push(elsewhere, utf8("1")))))
        .hasRootCauseInstanceOf(IllegalArgumentException.class)
        .rootCause()
        .hasMessageContaining(store.hashTag());
    assertThat(join(store.show(k))).hasValueSatisfying(r -> assertThat(r.completed()).isFalse());
    assertThat(
            cluster.command(cluster.masterOf(RedisCluster.slotOf(elsewhere)), "EXISTS", elsewhere))
        .isEqualTo("0");
    // In the record's slot it lands with the completion.
    String ledger = store.hashTag() + ":ledger";
    assertThat(
            join(store.complete(k, a.token(), utf8("paid"), RedisEffect.push(ledger, utf8("1")))))
        .isEqualTo(new Settlement.Done(0));
    assertThat(cluster.command(cluster.masterOf(RedisCluster.slotOf(ledger)), "LLEN", ledger))
        .isEqualTo("1");
  }

  @Test
  void aClusterWithReplicasPassesTheDurabilityCheckWithoutAnAof() {
    try (RedisKeyStore s =
        RedisKeyStore.builder()
            .clusterUri(cluster.uris().get(0))
            .prefix("durable")
            .requireDurability(true)
            .build()) {
      assertThat(join(s.show(key("x")))).isEmpty();
    }
  }

  /** Retries {@code op} for up to 30 s while it fails with an unknown outcome (a failover). */
  static <T> T eventually(java.util.function.Supplier<T> op) {
    long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (true) {
      try {
        return op.get();
      } catch (CompletionException e) {
        if (!(e.getCause() instanceof KeyStoreException) || System.nanoTime() > end) {
          throw e;
        }
      }
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
  }
}
