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
 * going: the leader dies under a registered client with calls in flight, the client reconnects and
 * resends, every increment is answered once and the client keeps working; on the idle cluster ticks
 * keep advancing log time on every replica, which converge.
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
        // The client has registered and written before the leader dies, so the failover hits a
        // live session with calls in flight, not a registration.
        assertThat(client.increment("c", 1)).isEqualTo(1);
        List<CompletableFuture<Long>> calls = new ArrayList<>();
        for (int i = 0; i < 3_000; i++) {
          calls.add(client.incrementAsync("c", 1));
          if (i == 1_000) {
            Eventually.until(
                "the pipeline answered", Duration.ofSeconds(30), () -> calls.get(0).isDone());
            cluster.kill(leader); // calls 1,001 and later are certainly unanswered
          }
        }
        CompletableFuture.allOf(calls.toArray(CompletableFuture[]::new)).join();
        // FIFO and exactly once: call i is applied (i + 2)-th.
        for (int i = 0; i < calls.size(); i++) {
          assertThat(calls.get(i)).as("call %d", i).isCompletedWithValue((long) i + 2);
        }
        assertThat(client.retries()).as("reconnects after the leader died").isPositive();
        cluster.restart(leader);
        // The client still works after the failover.
        assertThat(client.increment("c", 1)).isEqualTo(3_002);
        assertThat(client.get("c").orElseThrow().valueAsString()).isEqualTo("3002");
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
