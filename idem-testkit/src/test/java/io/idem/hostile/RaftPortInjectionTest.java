package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.idem.client.IdemClient;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.Limits;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterReply;
import io.idem.proto.SessionCmd;
import io.idem.server.ServerConfig;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A hostile process on the Raft port of a plaintext cluster, with Ratis's own client: every kind of
 * injection it tried against earlier builds (a configuration change, a write through another
 * client's session, a clock jump, an entry of an unknown log format, group removal and a membership
 * change) is refused before it reaches the log. Each test then shows nothing was applied and the
 * replicas' digests agree.
 */
@Timeout(180)
class RaftPortInjectionTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static List<ServerConfig.Peer> peers;
  static String leaderId;
  static final long TEN_YEARS_MS = 10L * 365 * 24 * 3600 * 1000;

  @BeforeAll
  static void start() {
    cluster = LocalCluster.start(3, dir);
    int leader = cluster.waitForLeader(Duration.ofSeconds(60));
    peers = cluster.node(0).config().peers();
    leaderId = peers.get(leader).id();
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static RaftPortClient attacker() {
    return new RaftPortClient(peers, leaderId, null);
  }

  private static LogEntry entry(long stampMs, int version, Command... commands) {
    return LogEntry.newBuilder()
        .setFormatVersion(version)
        .setLeaderTimeMs(stampMs)
        .addAllCommands(List.of(commands))
        .build();
  }

  /** What the gate answers: Ratis's client service is closed on the Raft port. */
  private static void assertRefusedByTheGate(Throwable t) {
    assertThat(t).hasStackTraceContaining("PERMISSION_DENIED");
    assertThat(t).hasStackTraceContaining("the Raft port serves the cluster's members only");
  }

  private static IdemClient client() {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .requestTimeout(Duration.ofSeconds(20))
        .build();
  }

  @Test
  void aConfigureProposedOnTheRaftPortIsRefused() throws Exception {
    int before = cluster.node(0).status().getLimits().getMaxValueBytes();
    LogEntry configure =
        entry(
            System.currentTimeMillis(),
            5,
            Command.newBuilder()
                .setConfigure(
                    ConfigureCmd.newBuilder().setLimits(Limits.newBuilder().setMaxValueBytes(16)))
                .build());
    try (RaftPortClient a = attacker()) {
      assertThatThrownBy(() -> a.propose(configure))
          .satisfies(RaftPortInjectionTest::assertRefusedByTheGate);
    }
    try (IdemClient c = client()) {
      c.put("after-configure", "a value longer than sixteen bytes");
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getLimits().getMaxValueBytes()).isEqualTo(before);
    }
  }

  @Test
  void aWriteForgedThroughAnotherClientsSessionIsRefused() throws Exception {
    String leaderAddress = cluster.clientAddresses().get(peers.indexOf(peerById(leaderId)));
    try (RawSession victim = new RawSession(leaderAddress)) {
      RegisterReply grant = victim.registerSession(41);
      victim.open(grant);
      victim.send(1, 1, put("victim/own", "mine"));
      assertThat(victim.answerTo(1).getResult().getCode()).isEqualTo(Code.OK);

      SessionCmd forged =
          SessionCmd.newBuilder()
              .setClientId(grant.getClientId())
              .setEpoch(grant.getEpoch())
              .setSeq(2)
              .setAck(2)
              .setOp(put("victim/balance", "forged"))
              .build();
      try (RaftPortClient a = attacker()) {
        assertThatThrownBy(
                () ->
                    a.propose(
                        entry(
                            System.currentTimeMillis(),
                            5,
                            Command.newBuilder().setSession(forged).build())))
            .satisfies(RaftPortInjectionTest::assertRefusedByTheGate);
      }
      // The victim's own next request is number 2, as if nothing had happened.
      victim.send(2, 2, put("victim/own", "still mine"));
      assertThat(victim.answerTo(2).getResult().getCode()).isEqualTo(Code.OK);
    }
    try (IdemClient c = client()) {
      assertThat(c.get("victim/balance")).isEmpty();
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
  }

  @Test
  void anEntryStampedTenYearsAheadIsRefusedAndSessionsLive() throws Exception {
    String leaderAddress = cluster.clientAddresses().get(peers.indexOf(peerById(leaderId)));
    try (RawSession s = new RawSession(leaderAddress)) {
      RegisterReply grant = s.registerSession(42);
      s.open(grant);
      try (RaftPortClient a = attacker()) {
        assertThatThrownBy(() -> a.propose(entry(System.currentTimeMillis() + TEN_YEARS_MS, 5)))
            .satisfies(RaftPortInjectionTest::assertRefusedByTheGate);
      }
      s.send(1, 1, put("clock/check", "alive"));
      assertThat(s.answerTo(1).getResult().getCode())
          .as("the session outlived the attempt")
          .isEqualTo(Code.OK);
    }
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getLogTimeMs())
          .as("log time of node %d", i)
          .isLessThan(System.currentTimeMillis() + 60_000);
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
  }

  @Test
  void anEntryOfAnUnknownLogFormatIsRefusedAndTheNodesGoOn() throws Exception {
    try (RaftPortClient a = attacker()) {
      assertThatThrownBy(() -> a.propose(entry(System.currentTimeMillis(), 99)))
          .satisfies(RaftPortInjectionTest::assertRefusedByTheGate);
    }
    try (IdemClient c = client()) {
      c.put("after-version-99", "applied");
      assertThat(c.get("after-version-99")).isPresent();
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getEntriesSkipped()).isZero();
    }
  }

  @Test
  void groupRemovalAndMembershipChangesOnTheRaftPortAreRefused() throws Exception {
    Path leaderData = cluster.node(peers.indexOf(peerById(leaderId))).config().dataDir();
    try (RaftPortClient a = attacker()) {
      assertThatThrownBy(a::removeGroup).satisfies(RaftPortInjectionTest::assertRefusedByTheGate);
      assertThatThrownBy(() -> a.reconfigure(peerById(leaderId)))
          .satisfies(RaftPortInjectionTest::assertRefusedByTheGate);
    }
    try (Stream<Path> files = Files.list(leaderData)) {
      assertThat(files.count()).as("the leader's data directory is still there").isPositive();
    }
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getMembersCount()).isEqualTo(3);
    }
    try (IdemClient c = client()) {
      c.put("after-removal", "applied");
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
  }

  private static ServerConfig.Peer peerById(String id) {
    return peers.stream().filter(p -> p.id().equals(id)).findFirst().orElseThrow();
  }

  private static Operation put(String key, String value) {
    return Operation.newBuilder()
        .setPut(Put.newBuilder().setKey(key).setValue(ByteString.copyFromUtf8(value)))
        .build();
  }
}
