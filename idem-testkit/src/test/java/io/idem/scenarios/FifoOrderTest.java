package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.Eventually;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * One client's pipelined appends land in the order it issued them, although connections are reset
 * mid-stream, answers are lost and deliveries delayed, so that requests are resent and reach the
 * leader out of order.
 */
@Timeout(180)
class FifoOrderTest {
  @TempDir Path dir;

  @Test
  void pipelinedAppendsLandInIssueOrderThroughResetsAndLosses() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir)) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
          IdemClient client =
              IdemClient.builder()
                  .servers(List.of(proxy.address()))
                  .window(64)
                  .stallTimeout(Duration.ofMillis(500))
                  .requestTimeout(Duration.ofSeconds(120))
                  .build()) {
        List<CompletableFuture<Long>> calls = new ArrayList<>();
        int n = 2_000;
        for (int i = 0; i < n; i++) {
          calls.add(
              client.appendAsync("fifo", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
          switch (i % 400) {
            case 100 -> proxy.resetConnections();
            case 200 -> proxy.blackholeResponses();
            case 230 -> {
              proxy.passResponses();
              proxy.resetConnections();
            }
            case 300 -> proxy.delay(Duration.ofMillis(3));
            case 350 -> proxy.delay(Duration.ZERO);
            default -> {}
          }
          // Faults hit a stream that makes progress: every 50 calls, wait until the client is at
          // most 50 calls ahead of its answers (a full window is 64). Not while answers are
          // swallowed (calls 200 to 229 of every 400): no progress is possible then.
          if (i % 50 == 0 && i % 400 != 200) {
            CompletableFuture<Long> behind = calls.get(Math.max(0, i - 50));
            Eventually.until(
                "call " + (i - 50) + " answered", Duration.ofSeconds(60), behind::isDone);
          }
        }
        for (int i = 0; i < n; i++) {
          assertThat(calls.get(i).get()).as("length after append %d", i).isEqualTo(i + 1);
        }
        List<byte[]> list = client.get("fifo").orElseThrow().elements();
        assertThat(list).hasSize(n);
        for (int i = 0; i < n; i++) {
          assertThat(new String(list.get(i), StandardCharsets.UTF_8))
              .isEqualTo(Integer.toString(i));
        }
        assertThat(client.retries()).isPositive();
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }
}
