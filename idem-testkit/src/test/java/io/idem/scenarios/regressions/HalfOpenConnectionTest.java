package io.idem.scenarios.regressions;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.Eventually;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Regression for issue 11, item 2: a connection that goes silent and never heals. Mid-pipeline, the
 * connection from a client to a healthy leader stopped carrying bytes, in both directions or in
 * one, while the TCP socket stayed open (what a NAT or a firewall does when it drops its state for
 * the flow). The client noticed the stall but reopened its stream on the same dead HTTP/2
 * connection, because its transport keeps one gRPC channel per address: no new connection in 60 s,
 * calls left with unknown outcome, the session stalled.
 *
 * <p>A one-node cluster, so that no leader hint can lead the client around the proxy. The client
 * must give up on the silent connection, open a new one through the same proxy, and resend: every
 * call completes, and each increment is applied once.
 */
@Timeout(90)
class HalfOpenConnectionTest {
  /** Increments issued in all; half before the silence, half after it. */
  private static final int CALLS = 200;

  /** How long the client may take to notice the silence, reconnect and finish the pipeline. */
  private static final Duration RECOVERY = Duration.ofSeconds(30);

  @TempDir Path dir;

  @Test
  void clientReplacesAConnectionSilentBothWays() throws Exception {
    pipelineSurvives(FaultProxy::silenceOpenConnections);
  }

  @Test
  void clientReplacesAConnectionWhoseRequestsVanish() throws Exception {
    pipelineSurvives(FaultProxy::silenceRequestsOnOpenConnections);
  }

  @Test
  void clientReplacesAConnectionWhoseResponsesVanish() throws Exception {
    pipelineSurvives(FaultProxy::silenceResponsesOnOpenConnections);
  }

  private void pipelineSurvives(Consumer<FaultProxy> silence) throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
          IdemClient client =
              IdemClient.builder()
                  .servers(List.of(proxy.address()))
                  .window(32)
                  .stallTimeout(Duration.ofSeconds(1))
                  // Longer than the test: a call may not end by its deadline instead of an answer.
                  .requestTimeout(Duration.ofSeconds(120))
                  .build()) {
        assertThat(client.increment("n", 0)).isZero(); // registered; the stream flows
        long connectionsBefore = proxy.acceptedConnections();

        List<CompletableFuture<Long>> calls = new ArrayList<>();
        for (int i = 0; i < CALLS / 2; i++) {
          calls.add(client.incrementAsync("n", 1));
        }
        Eventually.until(
            "the first answers of the pipeline", RECOVERY, () -> calls.get(0).isDone());
        silence.accept(proxy);
        // These are certainly unanswered when the connection goes silent.
        for (int i = CALLS / 2; i < CALLS; i++) {
          calls.add(client.incrementAsync("n", 1));
        }

        Eventually.until(
            "every call answered",
            RECOVERY,
            () -> calls.stream().allMatch(CompletableFuture::isDone),
            () ->
                calls.stream().filter(CompletableFuture::isDone).count()
                    + " of "
                    + CALLS
                    + " calls done, "
                    + proxy.acceptedConnections()
                    + " connections accepted by the proxy ("
                    + connectionsBefore
                    + " before the silence), "
                    + proxy.silencedBytes()
                    + " bytes dropped, client retries "
                    + client.retries());
        // FIFO order: call i is applied i-th, so it returns i + 1; an increment applied twice, or
        // a call that failed, shows here.
        for (int i = 0; i < CALLS; i++) {
          assertThat(calls.get(i)).as("call %d", i).isCompletedWithValue((long) i + 1);
        }
        assertThat(client.get("n").orElseThrow().valueAsString())
            .isEqualTo(Integer.toString(CALLS));
        assertThat(proxy.silencedBytes()).as("bytes the silenced connection dropped").isPositive();
        assertThat(proxy.acceptedConnections())
            .as("connections accepted by the proxy: the client opened a new one")
            .isGreaterThan(connectionsBefore);
        assertThat(client.retries()).isPositive();
      }
    }
  }
}
