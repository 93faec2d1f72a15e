package io.idem.testkit.stores;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Redis Cluster harness: six nodes, and each fault it offers doing what it says, checked
 * through redis-cli on the nodes themselves.
 */
@Timeout(300)
class RedisClusterTest {
  @TempDir Path dir;

  @Test
  void threeMastersWithAReplicaEachSurviveAKillARestartAFailoverAndASlotMove() {
    List<Long> pids = new ArrayList<>();
    try (RedisCluster cluster = RedisCluster.start(dir, RedisServer.Aof.OFF)) {
      for (int port : cluster.ports()) {
        pids.add(cluster.node(port).pid());
      }
      assertThat(cluster.masters()).hasSize(3);
      for (int m : cluster.masters()) {
        assertThat(cluster.replicasOf(m)).hasSize(1);
      }
      String key = "{idem:keys}:probe";
      int slot = RedisCluster.slotOf(key);
      int master = cluster.masterOf(slot);
      assertThat(cluster.command(master, "CLUSTER", "KEYSLOT", key)).isEqualTo("" + slot);
      assertThat(RedisCluster.slotOf("plain")).isEqualTo(keyslot(cluster, master, "plain"));
      assertThat(cluster.command(master, "SET", key, "1")).isEqualTo("OK");
      cluster.awaitReplicated(master);

      // kill -9 of the master: its replica, which acknowledged the write, takes over with it.
      int replica = cluster.replicasOf(master).get(0);
      int killed = cluster.killMasterOf(slot);
      assertThat(killed).isEqualTo(master);
      assertThat(cluster.masterOf(slot)).isEqualTo(replica);
      assertThat(cluster.command(replica, "GET", key)).isEqualTo("1");

      // The killed master comes back as its successor's replica.
      cluster.restart(killed);
      assertThat(cluster.replicasOf(replica)).containsExactly(killed);

      // CLUSTER FAILOVER hands the slot back without losing a write.
      assertThat(cluster.command(replica, "INCR", key)).isEqualTo("2");
      cluster.failover(killed);
      assertThat(cluster.masterOf(slot)).isEqualTo(killed);
      assertThat(cluster.command(killed, "GET", key)).isEqualTo("2");

      // Resharding: the slot and its key move to another master.
      int target = cluster.masters().stream().filter(m -> m != killed).findFirst().orElseThrow();
      cluster.moveSlot(slot, target);
      assertThat(cluster.masterOf(slot)).isEqualTo(target);
      assertThat(cluster.command(target, "GET", key)).isEqualTo("2");
      assertThat(cluster.command(killed, "GET", key)).startsWith("MOVED " + slot);
      for (int port : cluster.ports()) {
        pids.add(cluster.node(port).pid()); // the restarted node's new process too
      }
    }
    for (long pid : pids) {
      assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false))
          .as("pid %d stopped", pid)
          .isFalse();
    }
  }

  private static int keyslot(RedisCluster cluster, int port, String key) {
    return Integer.parseInt(cluster.command(port, "CLUSTER", "KEYSLOT", key));
  }
}
