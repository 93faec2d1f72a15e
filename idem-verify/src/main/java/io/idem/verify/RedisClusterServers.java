package io.idem.verify;

import io.idem.testkit.stores.RedisCluster;
import io.idem.testkit.stores.RedisServer;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;

/**
 * A private Redis Cluster for a keys campaign on Redis Cluster ({@link RedisPayments}, {@code
 * redis-cluster}): six nodes ({@link RedisCluster}: three masters with a replica each), no AOF: an
 * acknowledged completion is kept by the replica that acknowledged it (the store waits for one,
 * {@link RedisPayments#CLUSTER_WAIT_REPLICAS}). Faults, on the master that serves the {@code
 * {payments}} slot: kill -9 after its replica was stopped for 0.3-1 s (the replica takes over
 * without what it missed; the killed node comes back after 0.2-1 s as the new master's replica),
 * {@code CLUSTER FAILOVER} of its replica, and the slot moved to another master with its keys while
 * payments go on. Workers and checker reach the nodes directly.
 */
final class RedisClusterServers implements PaymentStore.Servers {
  /** The slot every key of the campaign lives in. */
  static final int SLOT = RedisCluster.slotOf("{" + RedisPayments.PREFIX + "}");

  private final RedisCluster cluster;

  private RedisClusterServers(RedisCluster cluster) {
    this.cluster = cluster;
  }

  /** Starts the six nodes with their data under {@code dir}. */
  static RedisClusterServers start(Path dir) {
    return new RedisClusterServers(RedisCluster.start(dir, RedisServer.Aof.OFF));
  }

  @Override
  public String workerAddress() {
    return String.join(",", cluster.uris());
  }

  @Override
  public String directAddress() {
    return workerAddress();
  }

  @Override
  public List<PaymentStore.Fault> faults() {
    return List.of(
        new PaymentStore.Fault("kill -9 redis master", this::killMaster),
        new PaymentStore.Fault("CLUSTER FAILOVER", this::failover),
        new PaymentStore.Fault("reshard the payments slot", this::reshard));
  }

  private boolean killMaster(Random random) throws InterruptedException {
    int master = cluster.masterOf(SLOT);
    List<Integer> replicas = cluster.replicasOf(master);
    if (replicas.isEmpty()) {
      return false;
    }
    // The replica falls behind first (stopped for 0.3-1 s, as on a slow link), so that the kill
    // finds writes the master acknowledged without WAIT and had not sent: what WAIT must keep out
    // of the acknowledged.
    int replica = replicas.get(0);
    cluster.pause(replica);
    try {
      Thread.sleep(300 + random.nextInt(700));
      cluster.kill(master);
    } finally {
      cluster.resume(replica);
    }
    cluster.awaitHealthy();
    Thread.sleep(200 + random.nextInt(800));
    cluster.restart(master);
    return true;
  }

  private boolean failover(Random random) {
    List<Integer> replicas = cluster.replicasOf(cluster.masterOf(SLOT));
    if (replicas.isEmpty()) {
      return false;
    }
    cluster.failover(replicas.get(random.nextInt(replicas.size())));
    return true;
  }

  private boolean reshard(Random random) throws InterruptedException {
    int from = cluster.masterOf(SLOT);
    List<Integer> others = cluster.masters().stream().filter(m -> m != from).toList();
    if (others.isEmpty()) {
      return false;
    }
    int to = others.get(random.nextInt(others.size()));
    cluster.moveSlot(SLOT, to);
    // MIGRATE's writes reach the new master's replica asynchronously: let them, before the next
    // fault may kill that master.
    Thread.sleep(1000);
    return true;
  }

  @Override
  public void close() {
    cluster.close();
  }
}
