package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.client.InvalidArgumentException;
import io.idem.client.KeyValue;
import io.idem.client.MembershipChange;
import io.idem.proto.Partitions;
import io.idem.proto.StatusReply;
import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Moving one group's replica to a new node ({@code idem group move}): a node started with {@code
 * join} and the cluster's number of groups hosts every group as a member of none; it joins the
 * metadata group (a data group refuses it before), then group 3's configuration change adds it and
 * then removes n3, group 3's leader, under a client appending to group 3 the whole time. Every
 * acknowledged append is in the list once, the other groups keep their members, the new replica
 * holds the group's state, n3's closed replica says so and names a member, and a client that knows
 * only n3 still reaches group 3. Group 3's leadership then goes to n4, the member leading the
 * fewest groups, and comes back to it after a transfer away.
 */
@Timeout(240)
class GroupMoveTest {
  private static final int GROUPS = 4;
  private static final int MOVED = 3;

  @TempDir Path dir;

  private static String keyOf(String prefix, int group) {
    for (int i = 0; ; i++) {
      String k = prefix + "-" + i;
      if (Partitions.groupOf(Partitions.of(k), GROUPS) == group) {
        return k;
      }
    }
  }

  private static StatusReply statusOf(String clientAddress, int group) {
    try (RawSession raw = new RawSession(clientAddress, group)) {
      return raw.status();
    }
  }

  @Test
  void aGroupsReplicaMovesToAJoinedNodeUnderWritesAndOnlyThatGroupChanges() throws Exception {
    String list = keyOf("moved", MOVED);
    try (LocalCluster c = LocalCluster.start(3, dir.resolve("c"), b -> b.groups(GROUPS));
        IdemClient client =
            IdemClient.builder()
                .servers(c.clientAddresses())
                .requestTimeout(Duration.ofSeconds(30))
                .build()) {
      ServerConfig c4 = LocalCluster.joiner(dir.resolve("n4"), "n4").groups(GROUPS).build();
      try (IdemServer n4 = IdemServer.start(c4)) {
        ClusterStatus.Member m4 =
            new ClusterStatus.Member("n4", c4.self().raftAddress(), c4.self().clientAddress());
        assertThat(n4.groupNumbers()).hasSize(GROUPS + 1);
        for (int g = 0; g <= GROUPS; g++) {
          StatusReply idle = statusOf(c4.self().clientAddress(), g);
          assertThat(idle.getMembersList())
              .as("the joined node is a member of no group yet (group %d)", g)
              .isEmpty();
          assertThat(idle.getRole()).as("its role in group %d", g).isEqualTo("NOT_A_MEMBER");
          assertThat(n4.isLeader(g)).isFalse();
        }
        // The whole-cluster change stays refused: it would change one group only.
        MembershipChange whole =
            client.changeMembers(List.of(m4), List.of(), Duration.ofSeconds(10));
        assertThat(whole.committed()).isFalse();
        assertThat(whole.message()).contains("idem group move");

        // A writer appends to the moved group throughout.
        ConcurrentLinkedQueue<String> acked = new ConcurrentLinkedQueue<>();
        AtomicBoolean stop = new AtomicBoolean();
        List<Throwable> failures = new java.util.concurrent.CopyOnWriteArrayList<>();
        Thread writer =
            new Thread(
                () -> {
                  for (int i = 0; !stop.get() && i < 100_000; i++) {
                    String v = "v" + i;
                    try {
                      client.append(list, v.getBytes(StandardCharsets.UTF_8));
                      acked.add(v);
                    } catch (RuntimeException e) {
                      failures.add(e);
                      return;
                    }
                  }
                },
                "writer");
        writer.start();
        Eventually.until("appends acknowledged", Duration.ofSeconds(30), () -> acked.size() > 20);

        // A data group's leader checks registrations in its replica of the metadata group: a node
        // joins group 0 before a data group, and the other way round is refused.
        MembershipChange early =
            client.changeMembers(MOVED, List.of(m4), List.of(), Duration.ofSeconds(60));
        assertThat(early.committed()).isFalse();
        assertThat(early.message())
            .contains("n4 is not a member of the metadata group (0)")
            .contains("idem group add --group 0 --id n4");
        MembershipChange inMeta =
            client.changeMembers(0, List.of(m4), List.of(), Duration.ofSeconds(60));
        assertThat(inMeta.committed()).as(inMeta.message()).isTrue();
        MembershipChange added =
            client.changeMembers(MOVED, List.of(m4), List.of(), Duration.ofSeconds(60));
        assertThat(added.committed()).as(added.message()).isTrue();
        assertThat(added.members())
            .extracting(ClusterStatus.Member::id)
            .containsExactlyInAnyOrder("n1", "n2", "n3", "n4");
        // n3 leads the group when it is removed (group 3 prefers it: RaftHost.preferredLeader), and
        // Ratis's leader commits the configuration without itself and then closes its replica.
        Eventually.until(
            "n3 leads group " + MOVED, Duration.ofSeconds(60), () -> c.node(2).isLeader(MOVED));
        MembershipChange removed =
            client.changeMembers(MOVED, List.of(), List.of("n3"), Duration.ofSeconds(60));
        assertThat(removed.committed()).as(removed.message()).isTrue();
        assertThat(removed.members())
            .extracting(ClusterStatus.Member::id)
            .containsExactlyInAnyOrder("n1", "n2", "n4");
        // Group 3 lost its priority member (n3), so the balancer's plan (LeaderPlan) gives it to
        // the voter leading the fewest groups, n4 (n1 leads groups 1 and 4, n2 group 2), and gives
        // it back after a transfer away.
        Eventually.until(
            "n4 leads group " + MOVED + ", as planned",
            Duration.ofSeconds(60),
            () -> n4.isLeader(MOVED));
        Eventually.until(
            "n4 hands group " + MOVED + " to n1",
            Duration.ofSeconds(30),
            () -> {
              try {
                n4.transferLeadership(MOVED, "n1", Duration.ofSeconds(5));
                return true;
              } catch (java.io.IOException e) {
                return false; // not ready yet (a new leader's first entry), or n1 not caught up
              }
            });
        Eventually.until(
            "n1 or n2 leads group " + MOVED,
            Duration.ofSeconds(30),
            () -> c.node(0).isLeader(MOVED) || c.node(1).isLeader(MOVED));
        Eventually.until(
            "n4 leads group " + MOVED + " again", Duration.ofSeconds(60), () -> n4.isLeader(MOVED));
        int before = acked.size();
        Eventually.until(
            "appends go on after the move",
            Duration.ofSeconds(30),
            () -> acked.size() > before + 20);
        stop.set(true);
        writer.join(60_000);
        assertThat(failures).as("the writer's failures").isEmpty();

        // Exactly once, in order: every acknowledged append once, nothing else.
        List<String> elements = new ArrayList<>();
        client
            .get(list)
            .map(KeyValue::elements)
            .orElseThrow()
            .forEach(b -> elements.add(new String(b, StandardCharsets.UTF_8)));
        assertThat(elements).containsExactlyElementsOf(acked);

        // n4 leaves the metadata group only once it left every data group.
        MembershipChange leaveMeta =
            client.changeMembers(0, List.of(), List.of("n4"), Duration.ofSeconds(60));
        assertThat(leaveMeta.committed()).isFalse();
        assertThat(leaveMeta.message())
            .contains("n4 is still a member of data group(s) [" + MOVED + "]");

        // The other groups kept their members; the new replica holds the moved group's state.
        assertThat(client.status(0).members())
            .extracting(ClusterStatus.Member::id)
            .containsExactlyInAnyOrder("n1", "n2", "n3", "n4");
        for (int g = 1; g <= GROUPS; g++) {
          if (g != MOVED) {
            assertThat(client.status(g).members())
                .as("group %d's members", g)
                .extracting(ClusterStatus.Member::id)
                .containsExactlyInAnyOrder("n1", "n2", "n3");
          }
        }
        long leaderApplied = client.status(MOVED).appliedIndex();
        Eventually.until(
            "n4's replica of group " + MOVED + " catches up",
            Duration.ofSeconds(30),
            () -> statusOf(c4.self().clientAddress(), MOVED).getAppliedIndex() >= leaderApplied);
        assertThat(statusOf(c4.self().clientAddress(), MOVED).getKeys())
            .isEqualTo(statusOf(c.clientAddress(0), MOVED).getKeys());
        assertThat(statusOf(c4.self().clientAddress(), MOVED).getRole())
            .as("n4's role in group %d once a member", MOVED)
            .isIn("FOLLOWER", "LEADER");
        assertThat(statusOf(c4.self().clientAddress(), 1).getRole())
            .as("n4's role in group 1, which it never joined")
            .isEqualTo("NOT_A_MEMBER");

        // The removed replica no longer claims to lead: it says it is closed and names a member.
        Set<String> members =
            Set.of(c.clientAddress(0), c.clientAddress(1), c4.self().clientAddress());
        Eventually.until(
            "n3's replica of group " + MOVED + " says it is closed",
            Duration.ofSeconds(30),
            () -> statusOf(c.clientAddress(2), MOVED).getRole().equals("CLOSED"));
        StatusReply gone = statusOf(c.clientAddress(2), MOVED);
        assertThat(gone.getLeaderAddress()).as("n3's hint for group %d", MOVED).isIn(members);
        assertThat(c.node(2).isLeader(MOVED)).isFalse();
        assertThat(c.node(2).status().getGroupsList())
            .filteredOn(gs -> gs.getGroup() == MOVED)
            .singleElement()
            .satisfies(gs -> assertThat(gs.getRole()).isEqualTo("CLOSED"));

        // A client that knows n3 only: n3 left the group, and its answers lead the call to a
        // member.
        try (IdemClient viaN3 =
            IdemClient.builder()
                .servers(List.of(c.clientAddress(2)))
                .requestTimeout(Duration.ofSeconds(30))
                .build()) {
          viaN3.append(list, "via-n3".getBytes(StandardCharsets.UTF_8));
        }
        Set<String> after = new HashSet<>();
        client
            .get(list)
            .orElseThrow()
            .elements()
            .forEach(b -> after.add(new String(b, StandardCharsets.UTF_8)));
        assertThat(after).contains("via-n3");

        // Bad input changes nothing.
        org.assertj.core.api.Assertions.assertThatThrownBy(
                () ->
                    client.changeMembers(
                        GROUPS + 1, List.of(), List.of("n1"), Duration.ofSeconds(5)))
            .isInstanceOf(InvalidArgumentException.class)
            .hasMessageContaining("no group " + (GROUPS + 1));
      }
    }
  }
}
