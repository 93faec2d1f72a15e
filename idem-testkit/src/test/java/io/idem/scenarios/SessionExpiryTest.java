package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.proto.Code;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.RegisterRequest;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Without keep-alives a session expires after its TTL, by log time, on every replica alike; with
 * keep-alives it lives on. The idle leader's ticks carry log time forward.
 */
@Timeout(120)
class SessionExpiryTest {
  @TempDir Path dir;

  private static final Duration KEEP_ALIVE_EVERY = Duration.ofMillis(300);

  private static final Operation INCR =
      Operation.newBuilder().setIncrement(Increment.newBuilder().setKey("n").setDelta(1)).build();

  @Test
  void silentSessionExpiresEverywhereAndKeptAliveOneSurvives() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir, b -> b.tickIntervalMs(200))) {
      RegisterRequest ttl2s = RegisterRequest.newBuilder().setTtlMs(2_000).build();
      Sessions.Registered silent =
          Sessions.register(cluster, ttl2s.toBuilder().setNonce(1).build());
      Sessions.Registered alive = Sessions.register(cluster, ttl2s.toBuilder().setNonce(2).build());
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      Eventually.until(
          "both sessions on every replica",
          Duration.ofSeconds(10),
          () -> allReplicasHold(cluster, 2));

      try (RawSession keeper = new RawSession(cluster.clientAddress(leader))) {
        keeper.open(alive.grant());
        // Log time passes (ticks every 200 ms) until the silent session (TTL 2 s) is gone on every
        // replica, while the other is kept alive every 300 ms, well within its TTL.
        long[] lastKeepAlive = {0};
        Eventually.until(
            "only the kept-alive session on every replica",
            Duration.ofSeconds(15),
            () -> {
              long now = System.nanoTime();
              if (lastKeepAlive[0] == 0 || now - lastKeepAlive[0] >= KEEP_ALIVE_EVERY.toNanos()) {
                keeper.keepAlive(1);
                lastKeepAlive[0] = now;
              }
              return allReplicasHold(cluster, 1);
            });
        keeper.send(1, 1, INCR);
        assertThat(keeper.answerTo(1).getResult().getCode()).isEqualTo(Code.OK);
      }
      try (RawSession late = new RawSession(cluster.clientAddress(leader))) {
        late.open(silent.grant());
        // The stream's hello is refused: the session no longer exists.
        assertThat(late.next().getResult().getCode()).isEqualTo(Code.SESSION_EXPIRED);
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(20));
    }
  }

  private static boolean allReplicasHold(LocalCluster cluster, long sessions) {
    for (int i = 0; i < cluster.size(); i++) {
      if (cluster.node(i).status().getLiveSessions() != sessions) {
        return false;
      }
    }
    return true;
  }
}
