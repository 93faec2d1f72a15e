package io.idem.scenarios.regressions;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Regression: slow answers are not a stall. The client used to reconnect and resend everything when
 * its oldest request had waited the stall timeout, even while answers kept arriving; under load the
 * resends multiplied the leader's work (3 processes, 256 sessions: 165 writes/s, 4,702 duplicates).
 * Here every answer is delayed, so the oldest request waits far longer than the stall timeout while
 * the stream is plainly alive: there must be no resend at all.
 */
@Timeout(120)
class ResendStormTest {
  @TempDir Path dir;

  @Test
  void slowButFlowingAnswersCauseNoResend() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
          IdemClient client =
              IdemClient.builder()
                  .servers(List.of(proxy.address()))
                  .window(64)
                  .stallTimeout(Duration.ofMillis(300))
                  .requestTimeout(Duration.ofSeconds(60))
                  .build()) {
        client.increment("n", 0); // register before the slowdown
        proxy.delay(Duration.ofMillis(40));
        List<CompletableFuture<Long>> calls = new ArrayList<>();
        for (int i = 0; i < 300; i++) {
          calls.add(client.incrementAsync("n", 1));
        }
        for (CompletableFuture<Long> c : calls) {
          c.get();
        }
        proxy.delay(Duration.ZERO);
        assertThat(client.get("n").orElseThrow().valueAsString()).isEqualTo("300");
        assertThat(client.retries()).as("reconnects and resends").isZero();
        assertThat(client.duplicatesSeen()).isZero();
        assertThat(cluster.node(leader).status().getDuplicatesSuppressed()).isZero();
      }
    }
  }
}
