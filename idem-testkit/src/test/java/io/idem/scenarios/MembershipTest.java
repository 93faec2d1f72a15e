package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.client.InvalidArgumentException;
import io.idem.client.MembershipChange;
import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Membership changes on in-process nodes: a node started with {@code join} is added, catches up,
 * can lead, and a client that knows only the first nodes reaches it through the NOT_LEADER hint;
 * the leader refuses bad changes and changes nothing; a member that never comes fails the change in
 * bounded time; a data directory refuses to serve under another node's id.
 */
@Timeout(180)
class MembershipTest {
  @TempDir Path dir;

  private static ServerConfig joiner(Path dir, String id) {
    return LocalCluster.joiner(dir.resolve(id), id).build();
  }

  private static ClusterStatus.Member member(ServerConfig c) {
    ServerConfig.Peer p = c.self();
    return new ClusterStatus.Member(p.id(), p.raftAddress(), p.clientAddress());
  }

  @Test
  void anAddedNodeCatchesUpLeadsAndIsReachedThroughTheHint() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("c"));
        IdemClient client =
            IdemClient.builder()
                .servers(cluster.clientAddresses())
                .requestTimeout(Duration.ofSeconds(30))
                .build()) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      for (int i = 0; i < 100; i++) {
        client.increment("counter", 1);
      }
      ServerConfig c4 = joiner(dir, "n4");
      try (IdemServer n4 = IdemServer.start(c4)) {
        // Not a member yet: it neither leads nor knows a leader.
        assertThat(n4.isLeader()).isFalse();
        MembershipChange added =
            client.changeMembers(List.of(member(c4)), List.of(), Duration.ofSeconds(30));
        assertThat(added.committed()).as(added.message()).isTrue();
        assertThat(added.members())
            .extracting(ClusterStatus.Member::id)
            .containsExactlyInAnyOrder("n1", "n2", "n3", "n4");
        Eventually.until(
            "n4 applied the increments",
            Duration.ofSeconds(30),
            () -> n4.appliedIndex() >= cluster.node(0).appliedIndex() && n4.appliedIndex() > 0);

        // Leadership moves to the added node; the first nodes' Status and NOT_LEADER hints name
        // its client address (from the configuration in force, not their start-up peers).
        Eventually.until(
            "n4 leads",
            Duration.ofSeconds(90),
            () -> {
              for (int i = 0; i < 3 && !n4.isLeader(); i++) {
                if (cluster.node(i).isLeader()) {
                  try {
                    cluster.node(i).transferLeadership("n4", Duration.ofSeconds(10));
                  } catch (IOException e) {
                    return false;
                  }
                }
              }
              return n4.isLeader();
            });
        int follower = 0;
        try (IdemClient old =
            IdemClient.builder()
                .servers(cluster.clientAddress(follower))
                .requestTimeout(Duration.ofSeconds(30))
                .build()) {
          assertThat(old.status().leaderAddress()).isEqualTo(c4.self().clientAddress());
          assertThat(old.status().members()).hasSize(4).allMatch(ClusterStatus.Member::voter);
          // A client that knows one of the first nodes only: its writes reach the leader on n4.
          assertThat(old.increment("counter", 1)).isEqualTo(101);
        }

        // Removing the leader: it commits its own removal and steps down; the others go on.
        MembershipChange removed =
            client.changeMembers(List.of(), List.of("n4"), Duration.ofSeconds(30));
        assertThat(removed.committed()).as(removed.message()).isTrue();
        assertThat(removed.members())
            .extracting(ClusterStatus.Member::id)
            .containsExactlyInAnyOrder("n1", "n2", "n3");
        assertThat(client.increment("counter", 1)).isEqualTo(102);
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }

  @Test
  void badChangesAreRefusedAndChangeNothing() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("c"));
        IdemClient client =
            IdemClient.builder()
                .servers(cluster.clientAddresses())
                .requestTimeout(Duration.ofSeconds(30))
                .build()) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      ServerConfig.Peer n1 = cluster.node(0).config().self();
      Duration t = Duration.ofSeconds(30);
      // An id already a member (a node that lost its disk must come back under a new id).
      assertThatThrownBy(
              () ->
                  client.changeMembers(
                      List.of(new ClusterStatus.Member("n1", "127.0.0.1:1", "127.0.0.1:2")),
                      List.of(),
                      t))
          .isInstanceOf(InvalidArgumentException.class)
          .hasMessageContaining("n1 is already a member");
      assertThatThrownBy(
              () ->
                  client.changeMembers(
                      List.of(new ClusterStatus.Member("n9", n1.raftAddress(), "127.0.0.1:2")),
                      List.of(),
                      t))
          .isInstanceOf(InvalidArgumentException.class)
          .hasMessageContaining("raft address " + n1.raftAddress() + " is already in use");
      assertThatThrownBy(() -> client.changeMembers(List.of(), List.of("n9"), t))
          .isInstanceOf(InvalidArgumentException.class)
          .hasMessageContaining("no member n9 to remove (members: n1, n2, n3)");
      assertThatThrownBy(() -> client.changeMembers(List.of(), List.of("n1", "n2", "n3"), t))
          .isInstanceOf(InvalidArgumentException.class)
          .hasMessageContaining("would leave no member");
      assertThat(client.status().members())
          .extracting(ClusterStatus.Member::id)
          .containsExactlyInAnyOrder("n1", "n2", "n3");

      // A new member whose process never started: refused before anything is staged.
      long start = System.nanoTime();
      assertThatThrownBy(
              () ->
                  client.changeMembers(
                      List.of(
                          new ClusterStatus.Member(
                              "n5",
                              "127.0.0.1:" + LocalCluster.freePort(),
                              "127.0.0.1:" + LocalCluster.freePort())),
                      List.of(),
                      t))
          .isInstanceOf(InvalidArgumentException.class)
          .hasMessageContaining("n5 does not answer at its client address");
      assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(20));
      ServerConfig c6 = joiner(dir, "n6");
      try (IdemServer n6 = IdemServer.start(c6)) {
        assertThat(n6.status().getMembersList()).as("a joining node has no members").isEmpty();
        // The process at that address is another node.
        assertThatThrownBy(
                () ->
                    client.changeMembers(
                        List.of(
                            new ClusterStatus.Member(
                                "n7", c6.self().raftAddress(), c6.self().clientAddress())),
                        List.of(),
                        t))
            .isInstanceOf(InvalidArgumentException.class)
            .hasMessageContaining("is n6, not n7");
        // A member already in a cluster is not a new member.
        assertThatThrownBy(
                () ->
                    client.changeMembers(
                        List.of(
                            new ClusterStatus.Member(
                                "n2", "127.0.0.1:1", cluster.clientAddress(1))),
                        List.of(),
                        t))
            .isInstanceOf(InvalidArgumentException.class)
            .hasMessageContaining("n2 is already a member");
        // Its client port answers but its raft address is wrong: Ratis stages it and waits for
        // good. At the timeout the leader hands leadership over, which drops the staged change,
        // and a later change goes through.
        MembershipChange stuck =
            client.changeMembers(
                List.of(
                    new ClusterStatus.Member(
                        "n6", "127.0.0.1:" + LocalCluster.freePort(), c6.self().clientAddress())),
                List.of(),
                Duration.ofSeconds(5));
        assertThat(stuck.committed()).isFalse();
        assertThat(stuck.message()).contains("stepped down to cancel the change");
        assertThat(client.status().members()).hasSize(3);
        // (A leader keeps the raft address it tried for an id until it restarts: Ratis adds a
        // peer's address once. So the node comes back under a new id, as docs/OPERATIONS.md says.)
        ServerConfig c8 = joiner(dir, "n8");
        try (IdemServer n8 = IdemServer.start(c8)) {
          MembershipChange added =
              client.changeMembers(List.of(member(c8)), List.of(), Duration.ofSeconds(30));
          assertThat(added.committed()).as(added.message()).isTrue();
          assertThat(added.members()).hasSize(4);
          Eventually.until(
              "n8 applied entries", Duration.ofSeconds(30), () -> n8.appliedIndex() > 0);
        }
        assertThat(client.increment("after", 1)).isEqualTo(1);
      }
    }
  }

  @Test
  void aDataDirectoryRefusesAnotherNodesId() throws Exception {
    ServerConfig first = joiner(dir, "n7");
    IdemServer.start(first).close();
    ServerConfig other =
        ServerConfig.builder()
            .id("n8")
            .dataDir(first.dataDir())
            .peers(
                List.of(
                    new ServerConfig.Peer(
                        "n8",
                        "127.0.0.1:" + LocalCluster.freePort(),
                        "127.0.0.1:" + LocalCluster.freePort())))
            .build();
    assertThatThrownBy(() -> IdemServer.start(other))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("belongs to node n7, not n8");
    // Its own id still starts on it.
    IdemServer.start(first).close();
  }
}
