package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.core.SessionTableConfig;
import io.idem.proto.Code;
import io.idem.proto.ConfigureReply;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Limits;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.server.ServerConfig;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Limits and session bounds are replicated state: nodes started with different flags still decide
 * alike, by the configuration the log set (the bootstrap of whichever leader came first), and a
 * change through the log reaches every node.
 */
@Timeout(240)
class ReplicatedConfigTest {
  @TempDir Path dir;

  /** Node {@code i}'s own flags: values up to 1000 * (i + 1) bytes, a window of 8 * (i + 1). */
  private static ServerConfig.Builder flags(int i, ServerConfig.Builder b) {
    return b.limits(
            new io.idem.server.Limits(
                io.idem.server.Limits.DEFAULT_MAX_KEY_BYTES,
                1000 * (i + 1),
                io.idem.server.Limits.DEFAULT_MAX_NAME_CHARS,
                io.idem.server.Limits.DEFAULT_MAX_LEASE_TTL_MS))
        .sessions(SessionTableConfig.builder().window(8 * (i + 1)).build());
  }

  private static Operation put(int bytes) {
    return Operation.newBuilder()
        .setPut(Put.newBuilder().setKey("k").setValue(ByteString.copyFrom(new byte[bytes])))
        .build();
  }

  private static List<StatusReply> statuses(LocalCluster cluster) {
    List<StatusReply> all = new ArrayList<>();
    for (int i = 0; i < cluster.size(); i++) {
      if (cluster.isUp(i)) {
        all.add(cluster.node(i).status());
      }
    }
    return all;
  }

  /** The configuration every live node reports once they agree on one set at {@code > after}. */
  private static StatusReply agreedConfiguration(LocalCluster cluster, long after) {
    return Eventually.get(
        "every node applied the same configuration, set after index " + after,
        Duration.ofSeconds(30),
        () -> {
          List<StatusReply> all = statuses(cluster);
          StatusReply first = all.get(0);
          for (StatusReply s : all) {
            if (s.getConfigRevision() <= after
                || s.getConfigRevision() != first.getConfigRevision()
                || !s.getLimits().equals(first.getLimits())
                || !s.getSessions().equals(first.getSessions())) {
              return null;
            }
          }
          return first;
        });
  }

  private static ConfigureReply configureAtLeader(LocalCluster cluster, ConfigureRequest req) {
    return Eventually.get(
        "a leader took the configuration change",
        Duration.ofSeconds(30),
        () -> {
          try (RawSession admin =
              new RawSession(
                  cluster.clientAddress(cluster.waitForLeader(Duration.ofSeconds(30))))) {
            ConfigureReply r = admin.configure(req);
            return r.getCode() == Code.NOT_LEADER ? null : r;
          }
        });
  }

  @Test
  void nodesWithDifferentFlagsEnforceTheSameReplicatedLimits() throws Exception {
    try (LocalCluster cluster = LocalCluster.startEach(3, dir, ReplicatedConfigTest::flags)) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      StatusReply agreed = agreedConfiguration(cluster, 0);
      int maxValue = agreed.getLimits().getMaxValueBytes();
      assertThat(maxValue).as("one node's flags, whole").isIn(1000, 2000, 3000);
      assertThat(agreed.getSessions().getWindow()).isEqualTo(8 * maxValue / 1000);

      // Whichever node leads, whatever its own flags: the same answers.
      for (int turn = 0; turn < cluster.size(); turn++) {
        cluster.transferLeadershipTo(turn);
        Sessions.Registered reg =
            Sessions.register(
                cluster, RegisterRequest.newBuilder().setTtlMs(60_000).setNonce(turn + 1).build());
        assertThat(reg.grant().getLimits()).isEqualTo(agreed.getLimits());
        assertThat(reg.grant().getWindow()).isEqualTo(agreed.getSessions().getWindow());
        try (RawSession raw = new RawSession(cluster.clientAddress(reg.leader()))) {
          raw.open(reg.grant());
          raw.send(1, 1, put(maxValue + 1));
          ServerFrame over = raw.answerTo(1);
          assertThat(over.getResult().getCode())
              .as("at node %d", turn)
              .isEqualTo(Code.INVALID_ARGUMENT);
          assertThat(over.getResult().getMessage())
              .isEqualTo("value is " + (maxValue + 1) + " bytes, the limit is " + maxValue);
          raw.send(2, 2, put(maxValue));
          assertThat(raw.answerTo(2).getResult().getCode()).isEqualTo(Code.OK);
        }
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));

      // A change goes through the log and reaches every node; a bad one changes nothing.
      ConfigureReply changed =
          configureAtLeader(
              cluster,
              ConfigureRequest.newBuilder()
                  .setLimits(Limits.newBuilder().setMaxValueBytes(5000))
                  .build());
      assertThat(changed.getCode()).isEqualTo(Code.OK);
      assertThat(changed.getLimits().getMaxValueBytes()).isEqualTo(5000);
      assertThat(changed.getSessions()).isEqualTo(agreed.getSessions());
      StatusReply after = agreedConfiguration(cluster, agreed.getConfigRevision());
      assertThat(after.getConfigRevision()).isEqualTo(changed.getConfigRevision());
      assertThat(after.getLimits().getMaxValueBytes()).isEqualTo(5000);

      ConfigureReply bad =
          configureAtLeader(
              cluster,
              ConfigureRequest.newBuilder()
                  .setLimits(Limits.newBuilder().setMaxValueBytes(-1))
                  .build());
      assertThat(bad.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
      assertThat(bad.getMessage()).isEqualTo("max_value_bytes must be in [1, 2097152], got -1");
      assertThat(bad.getConfigRevision()).isEqualTo(changed.getConfigRevision());

      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      int follower = (leader + 1) % cluster.size();
      try (RawSession atFollower = new RawSession(cluster.clientAddress(follower))) {
        ConfigureReply refused = atFollower.configure(ConfigureRequest.getDefaultInstance());
        assertThat(refused.getCode()).isEqualTo(Code.NOT_LEADER);
        assertThat(refused.getLeaderHint()).isEqualTo(cluster.clientAddress(leader));
      }

      // A restarted node decides by the replicated configuration, not by its flags.
      cluster.kill(follower);
      cluster.restart(follower);
      assertThat(agreedConfiguration(cluster, agreed.getConfigRevision()).getConfigRevision())
          .isEqualTo(changed.getConfigRevision());
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }
}
