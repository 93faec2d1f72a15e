package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * After a failover under load (one entry in flight, the default), the new leader's batcher keeps
 * going: every increment is answered once, and on the idle cluster ticks keep advancing log time on
 * every replica, which converge.
 */
@Timeout(180)
class IdleTicksAfterFailoverTest {
  @TempDir Path dir;

  @Test
  void idleClusterTicksAndConvergesAfterALeaderKill() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir, b -> b.tickIntervalMs(200))) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (IdemClient client =
          IdemClient.builder()
              .servers(cluster.clientAddresses())
              .stallTimeout(Duration.ofSeconds(1))
              .window(64)
              .build()) {
        List<CompletableFuture<Long>> calls = new ArrayList<>();
        for (int i = 0; i < 3_000; i++) {
          calls.add(client.incrementAsync("c", 1));
          if (i == 1_000) {
            cluster.kill(leader);
          }
        }
        CompletableFuture.allOf(calls.toArray(CompletableFuture[]::new)).join();
        cluster.restart(leader);
        assertThat(client.increment("c", 0)).isEqualTo(3_000);
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
      Map<String, Long> before = cluster.appliedIndexes();
      Eventually.until(
          "ticks applied on every replica",
          Duration.ofSeconds(10),
          () -> {
            Map<String, Long> now = cluster.appliedIndexes();
            return before.keySet().stream().allMatch(n -> now.get(n) > before.get(n) + 3);
          });
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }
}
