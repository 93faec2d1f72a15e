package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.AppendResult;
import io.idem.client.FencedException;
import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.NotSentException;
import io.idem.testkit.Eventually;
import io.idem.testkit.FaultProxy;
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
 *
 * <p>The old instance talks to the leader through a {@link FaultProxy} that swallows its answers
 * before the "crash": its last appends are applied but unanswered, so they are certainly in flight
 * when the process dies, and the restarted instance must recover them (a restart with nothing in
 * flight would pass vacuously).
 */
@Timeout(180)
class ClientRestartTest {
  /** How many appends the old instance has in flight, applied but unanswered, when it dies. */
  private static final int IN_FLIGHT = 64;

  @TempDir Path dir;

  private static byte[] v(int i) {
    return ("v" + i).getBytes(StandardCharsets.UTF_8);
  }

  private static IdemClient.Builder client(List<String> servers, Path identity) {
    return IdemClient.builder()
        .servers(servers)
        .window(IN_FLIGHT)
        .sessionTtl(Duration.ofSeconds(60))
        // The old instance's calls must still be in flight, not failed, when its image is taken.
        .requestTimeout(Duration.ofSeconds(120))
        // No keep-alive from the old instance after the crash image: a dead process acks nothing.
        .keepAliveInterval(Duration.ofSeconds(50))
        .identity(identity, "worker-1");
  }

  private static int listSize(IdemClient reader) {
    return reader.get("list").map(kv -> kv.elements().size()).orElse(0);
  }

  /**
   * Issues appends {@code from} (inclusive) to {@code to} (exclusive) with the proxy swallowing
   * their answers, and waits until the leader has applied them all: they are in flight, applied but
   * unanswered, as when the answers are lost just before the process dies.
   */
  private static List<CompletableFuture<Long>> appendUnanswered(
      IdemClient old, FaultProxy proxy, IdemClient reader, int from, int to) {
    proxy.blackholeResponses();
    List<CompletableFuture<Long>> calls = new ArrayList<>();
    for (int i = from; i < to; i++) {
      calls.add(old.appendAsync("list", v(i)));
    }
    Eventually.until(
        "appends " + from + ".." + (to - 1) + " applied",
        Duration.ofSeconds(30),
        () -> listSize(reader) == to,
        () -> "list size " + listSize(reader));
    assertThat(calls).as("answered calls of the old instance").noneMatch(CompletableFuture::isDone);
    return calls;
  }

  @Test
  void restartedClientResumesAndEveryAppendLandsOnce() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("cluster"))) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      Path identity = dir.resolve("worker-1.id");
      try (FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
          IdemClient reader = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        IdemClient old = client(List.of(proxy.address()), identity).build();
        List<CompletableFuture<Long>> first = new ArrayList<>();
        for (int i = 0; i < 336; i++) {
          first.add(old.appendAsync("list", v(i)));
        }
        for (CompletableFuture<Long> f : first) {
          f.get();
        }
        // The last window's worth is in flight when the process dies; nothing waits behind it, so
        // the old instance sends nothing new (a dead process acknowledges nothing).
        appendUnanswered(old, proxy, reader, 336, 336 + IN_FLIGHT);
        // The process dies here: what survives is its identity file as it is now.
        Path image = dir.resolve("worker-1.after-crash.id");
        Files.copy(identity, image);

        try (IdemClient restarted = client(cluster.clientAddresses(), image).build()) {
          List<IdemClient.RecoveredCall> recovered = restarted.recovered();
          assertThat(recovered).as("calls recovered from the identity file").hasSize(IN_FLIGHT);
          List<CompletableFuture<Long>> second = new ArrayList<>();
          for (int i = 336 + IN_FLIGHT; i < 1_000; i++) {
            second.add(restarted.appendAsync("list", v(i)));
          }
          for (IdemClient.RecoveredCall r : recovered) {
            // What the old instance sent, as it sent it: the caller can tell its calls apart.
            assertThat(r.description()).isEqualTo("append");
            assertThat(r.key()).isEqualTo("list");
            assertThat(new String(r.value(), StandardCharsets.UTF_8))
                .matches("v(33[6-9]|3[4-9][0-9])");
            // Its typed result: an append's, the resend answered from the saved answer.
            assertThat(r.result().get())
                .isInstanceOfSatisfying(
                    AppendResult.class, a -> assertThat(a.duplicate()).isTrue());
          }
          for (CompletableFuture<Long> f : second) {
            f.get();
          }
          assertThat(restarted.epoch()).isEqualTo(1);
          // The recovered calls had been applied: their resends were answered as duplicates.
          assertThat(restarted.duplicatesSeen()).isGreaterThanOrEqualTo(IN_FLIGHT);

          // The old instance is still running: once answers reach it again, its next write is
          // fenced.
          proxy.passResponses();
          // Sent, it is answered FENCED; if the old instance already learned it was fenced (from
          // the answers it had in flight), the call is refused before it is sent, for that cause.
          assertThatThrownBy(() -> old.append("list", "zombie".getBytes(StandardCharsets.UTF_8)))
              .satisfiesAnyOf(
                  e -> assertThat(e).isInstanceOf(FencedException.class),
                  e ->
                      assertThat(e)
                          .isInstanceOf(NotSentException.class)
                          .hasCauseInstanceOf(FencedException.class));

          KeyValue list = restarted.get("list").orElseThrow();
          Map<String, Integer> counts = new HashMap<>();
          for (byte[] e : list.elements()) {
            counts.merge(new String(e, StandardCharsets.UTF_8), 1, Integer::sum);
          }
          for (int i = 0; i < 1_000; i++) {
            assertThat(counts.getOrDefault("v" + i, 0)).as("v%d", i).isEqualTo(1);
          }
          assertThat(list.elements()).hasSize(1_000);
        } finally {
          old.close();
        }
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
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      Path identity = dir.resolve("worker-2.id");
      try (FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
          IdemClient reader = IdemClient.builder().servers(cluster.clientAddresses()).build();
          IdemClient old = client(List.of(proxy.address()), identity).build()) {
        old.append("list", v(0)); // registered
        appendUnanswered(old, proxy, reader, 1, 1 + IN_FLIGHT);
        Path image = dir.resolve("worker-2.after-crash.id");
        Files.copy(identity, image);
        try (IdemClient restarted = client(cluster.clientAddresses(), image).build()) {
          List<IdemClient.RecoveredCall> recovered = restarted.recovered();
          assertThat(recovered).hasSize(IN_FLIGHT);
          for (IdemClient.RecoveredCall r : recovered) {
            assertThat(r.result()).succeedsWithin(Duration.ofSeconds(30));
          }
          assertThat(restarted.epoch()).isEqualTo(1);
          Map<String, Integer> counts = new HashMap<>();
          List<byte[]> elements = restarted.get("list").orElseThrow().elements();
          for (byte[] e : elements) {
            counts.merge(new String(e, StandardCharsets.UTF_8), 1, Integer::sum);
          }
          assertThat(elements).hasSize(1 + IN_FLIGHT);
          for (int i = 0; i <= IN_FLIGHT; i++) {
            assertThat(counts.getOrDefault("v" + i, 0)).as("v%d", i).isEqualTo(1);
          }
        }
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }
}
