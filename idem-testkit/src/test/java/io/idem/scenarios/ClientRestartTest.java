package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.FencedException;
import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A client process restarts from its identity file in the middle of a stream of appends: the new
 * instance resumes the session and resends what was in flight, every append lands exactly once, and
 * the old instance, still running, is fenced.
 */
@Timeout(180)
class ClientRestartTest {
  @TempDir Path dir;

  private static byte[] v(int i) {
    return ("v" + i).getBytes(StandardCharsets.UTF_8);
  }

  private static IdemClient.Builder client(LocalCluster cluster, Path identity) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .window(64)
        .sessionTtl(Duration.ofSeconds(60))
        // No keep-alive from the old instance after the crash image: a dead process acks nothing.
        .keepAliveInterval(Duration.ofSeconds(50))
        .identity(identity, "worker-1");
  }

  @Test
  void restartedClientResumesAndEveryAppendLandsOnce() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("cluster"))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      Path identity = dir.resolve("worker-1.id");
      IdemClient old = client(cluster, identity).build();
      List<CompletableFuture<Long>> first = new ArrayList<>();
      for (int i = 0; i < 336; i++) {
        first.add(old.appendAsync("list", v(i)));
      }
      for (CompletableFuture<Long> f : first) {
        f.get();
      }
      // The last window's worth is in flight when the process dies; nothing waits behind it, so
      // the old instance sends nothing more (a dead process acknowledges nothing).
      for (int i = 336; i < 400; i++) {
        first.add(old.appendAsync("list", v(i)));
      }
      // The process dies here: what survives is its identity file as it is now.
      Path image = dir.resolve("worker-1.after-crash.id");
      Files.copy(identity, image);

      try (IdemClient restarted = client(cluster, image).build()) {
        List<IdemClient.RecoveredCall> recovered = restarted.recovered();
        List<CompletableFuture<Long>> second = new ArrayList<>();
        for (int i = 400; i < 1_000; i++) {
          second.add(restarted.appendAsync("list", v(i)));
        }
        for (IdemClient.RecoveredCall r : recovered) {
          // What the old instance sent, as it sent it: the caller can tell its calls apart.
          assertThat(r.description()).isEqualTo("append");
          assertThat(r.key()).isEqualTo("list");
          assertThat(new String(r.value(), StandardCharsets.UTF_8))
              .matches("v(33[6-9]|3[4-9][0-9])");
          r.result().get();
        }
        for (CompletableFuture<Long> f : second) {
          f.get();
        }
        assertThat(restarted.epoch()).isEqualTo(1);

        // The old instance is still running: its next write is fenced.
        assertThatThrownBy(() -> old.append("list", "zombie".getBytes(StandardCharsets.UTF_8)))
            .isInstanceOf(FencedException.class);

        KeyValue list = restarted.get("list").orElseThrow();
        Map<String, Integer> counts = new HashMap<>();
        for (byte[] e : list.elements()) {
          counts.merge(new String(e, StandardCharsets.UTF_8), 1, Integer::sum);
        }
        for (int i = 0; i < 1_000; i++) {
          assertThat(counts.getOrDefault("v" + i, 0)).as("v%d", i).isEqualTo(1);
        }
        assertThat(list.elements()).hasSize(1_000);
        System.out.println(
            "ClientRestartTest: "
                + recovered.size()
                + " requests recovered from the identity file");
      } finally {
        old.close();
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }

  /**
   * Found by the fault campaign: a restarted client resent its recovered calls only once a new call
   * made it connect, so a caller that waited for the recovered calls first waited forever.
   */
  @Test
  void recoveredCallsAreResentWithoutANewCall() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("cluster"))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      Path identity = dir.resolve("worker-2.id");
      try (IdemClient old = client(cluster, identity).build()) {
        old.append("list", v(0)); // registered
        List<CompletableFuture<Long>> inFlight = new ArrayList<>();
        for (int i = 1; i <= 64; i++) {
          inFlight.add(old.appendAsync("list", v(i)));
        }
        Path image = dir.resolve("worker-2.after-crash.id");
        Files.copy(identity, image);
        try (IdemClient restarted = client(cluster, image).build()) {
          List<IdemClient.RecoveredCall> recovered = restarted.recovered();
          assertThat(recovered).isNotEmpty();
          for (IdemClient.RecoveredCall r : recovered) {
            assertThat(r.result()).succeedsWithin(Duration.ofSeconds(30));
          }
          assertThat(restarted.epoch()).isEqualTo(1);
          Map<String, Integer> counts = new HashMap<>();
          for (byte[] e : restarted.get("list").orElseThrow().elements()) {
            counts.merge(new String(e, StandardCharsets.UTF_8), 1, Integer::sum);
          }
          assertThat(counts.values()).allMatch(n -> n == 1);
          for (IdemClient.RecoveredCall r : recovered) {
            assertThat(counts).containsKey(new String(r.value(), StandardCharsets.UTF_8));
          }
        }
      }
    }
  }
}
