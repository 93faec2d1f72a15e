package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.proto.StatusReply;
import io.idem.testkit.Eventually;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 16, item 3: a client whose leader is frozen (SIGSTOP) asks the other servers who leads and
 * moves to the new leader, instead of waiting for its stall timeout. Behaviour, not a latency
 * figure (that is {@code idem verify --failover}, docs/PERFORMANCE.md): both clients here have a 60
 * s stall timeout, and the frozen leader's connection stays open (HTTP/2 keep-alive would drop it
 * only after {@code KEEPALIVE_TIME + KEEPALIVE_TIMEOUT}, 15 s), so within {@link #MOVE_BOUND} a
 * call can be answered only by a client that asked elsewhere. The client without probes (probe
 * interval at its stall timeout, as before the fix) is the control: it must still be waiting.
 */
@Tag("slow")
@Timeout(150)
class LeaderPauseFailoverTest {
  /** Well below the 15 s after which keep-alive drops the frozen connection. */
  static final Duration MOVE_BOUND = Duration.ofSeconds(9);

  @Test
  void aClientMovesOffAFrozenLeaderLongBeforeItsStallTimeout(@TempDir Path dir) throws Exception {
    try (ProcessCluster cluster = new ProcessCluster(dir, 3)) {
      cluster.startAll();
      try (IdemClient probing = client(cluster, IdemClient.DEFAULT_PROBE_INTERVAL);
          IdemClient control = client(cluster, Duration.ofSeconds(60))) {
        int leader = connectedToTheLeader(cluster, probing, control);
        cluster.pause(leader);
        try {
          long pausedAt = System.nanoTime();
          CompletableFuture<Long> moved = probing.incrementAsync("probing", 1);
          CompletableFuture<Long> stuck = control.incrementAsync("control", 1);
          assertThat(moved.get(MOVE_BOUND.toMillis(), TimeUnit.MILLISECONDS)).isPositive();
          long tookMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - pausedAt);
          assertThat(stuck)
              .as("the client without probes waits on the frozen leader (%d ms in)", tookMs)
              .isNotDone();
          assertThat(cluster.isRunning(leader)).isFalse(); // still frozen: someone else answered
        } finally {
          cluster.resume(leader);
        }
        // Resumed, the old leader steps down; the control's calls go through in the end too.
        assertThat(control.incrementAsync("control", 1).get(90, TimeUnit.SECONDS)).isPositive();
      }
    }
  }

  private static IdemClient client(ProcessCluster cluster, Duration probeInterval) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .stallTimeout(Duration.ofSeconds(60))
        .probeInterval(probeInterval)
        .requestTimeout(Duration.ofSeconds(100))
        .build();
  }

  /**
   * Waits for a leader, has both clients write through it, and returns it once it still leads in
   * the same term afterwards (so both clients' streams are open on it).
   */
  private static int connectedToTheLeader(ProcessCluster cluster, IdemClient a, IdemClient b) {
    String[] seen = {"nothing yet"};
    return Eventually.get(
        "a leader that keeps its term while both clients write through it",
        Duration.ofSeconds(90),
        () -> {
          Optional<Integer> l = cluster.leader();
          if (l.isEmpty()) {
            seen[0] = "no leader";
            return null;
          }
          Optional<Long> term = cluster.status(l.get()).map(StatusReply::getTerm);
          a.increment("probing", 1);
          b.increment("control", 1);
          Optional<Integer> after = cluster.leader();
          Optional<Long> termAfter = after.flatMap(cluster::status).map(StatusReply::getTerm);
          seen[0] = "leader " + l + " term " + term + ", then " + after + " term " + termAfter;
          return after.equals(l) && termAfter.equals(term) ? l.get() : null;
        },
        () -> seen[0]);
  }
}
