package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The leader dies with 1,000 pipelined increments in flight; each is applied exactly once. */
@Timeout(180)
class LeaderKillTest {
  @TempDir Path dir;

  @Test
  void counterEqualsTheNumberOfIncrementsAfterLeaderKill() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir)) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (IdemClient client =
          IdemClient.builder()
              .servers(cluster.clientAddresses())
              .window(256)
              .requestTimeout(Duration.ofSeconds(90))
              .build()) {
        client.increment("counter", 0);
        List<CompletableFuture<Long>> calls = new ArrayList<>();
        for (int i = 0; i < 1_000; i++) {
          calls.add(client.incrementAsync("counter", 1));
          if (i == 300) {
            // Kill once some of the stream has been applied and much is still in flight.
            Eventually.until(
                "some increments applied",
                Duration.ofSeconds(20),
                () -> calls.stream().filter(CompletableFuture::isDone).count() > 50);
            cluster.kill(leader);
          }
        }
        Set<Long> values = new HashSet<>();
        for (CompletableFuture<Long> c : calls) {
          values.add(c.get(90, TimeUnit.SECONDS));
        }
        // Every increment answered with a distinct counter value: none lost, none doubled.
        assertThat(values).hasSize(1_000);
        assertThat(client.get("counter").orElseThrow().valueAsString()).isEqualTo("1000");
        assertThat(client.retries()).isPositive();
      }
      cluster.restart(leader);
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }
}
