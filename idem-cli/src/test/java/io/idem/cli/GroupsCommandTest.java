package io.idem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The operator tool on a cluster of several Raft groups: {@code idem status} prints every group of
 * every node, and {@code idem config set} changes the configuration of every group, whose leaders
 * differ.
 */
@Timeout(120)
class GroupsCommandTest {
  @TempDir Path dir;

  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  private int run(String... args) {
    return Idem.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(args);
  }

  @Test
  void statusShowsEveryGroupAndAConfigurationChangeReachesEveryGroup() {
    try (LocalCluster c = LocalCluster.start(3, dir, b -> b.groups(3))) {
      String servers = String.join(",", c.clientAddresses());
      Eventually.until(
          "every group has a leader",
          Duration.ofSeconds(30),
          () -> {
            for (int g = 0; g <= 3; g++) {
              boolean led = false;
              for (int i = 0; i < 3; i++) {
                led |= c.node(i).isLeader(g);
              }
              if (!led) {
                return false;
              }
            }
            return true;
          });
      assertThat(run("config", "set", "--servers", servers, "--max-key-bytes", "1000"))
          .as("stderr: %s", err)
          .isZero();
      for (int g = 0; g <= 3; g++) {
        try (RawSession raw = new RawSession(c.clientAddress(0), g)) {
          int group = g;
          Eventually.until(
              "group " + g + " applied the change on n1",
              Duration.ofSeconds(20),
              () -> raw.status().getLimits().getMaxKeyBytes() == 1000,
              () -> "group " + group + ": " + raw.status().getLimits());
        }
      }
      out.getBuffer().setLength(0);
      assertThat(run("status", "--servers", servers)).as("stderr: %s", err).isZero();
      String printed = out.toString();
      assertThat(printed).contains("groups: 3 data groups and the metadata group (0)");
      // A line per node and group: 3 nodes x 4 groups, each naming a leader.
      assertThat(printed.lines().filter(l -> l.matches("n[123] +[0-3] +(LEADER|FOLLOWER) .*")))
          .hasSize(12);
    }
  }

  @Test
  void groupMoveMovesOneGroupsReplicaAndRefusesATypoWithoutChangingAnything() throws Exception {
    try (LocalCluster c = LocalCluster.start(3, dir.resolve("c"), b -> b.groups(3))) {
      String servers = String.join(",", c.clientAddresses());
      ServerConfig c4 = LocalCluster.joiner(dir.resolve("n4"), "n4").groups(3).build();
      try (IdemServer n4 = IdemServer.start(c4)) {
        String[] move = {
          "group",
          "move",
          "--servers",
          servers,
          "--group",
          "3",
          "--from",
          "n9",
          "--id",
          "n4",
          "--raft-address",
          c4.self().raftAddress(),
          "--client-address",
          c4.self().clientAddress()
        };
        assertThat(run(move)).isEqualTo(1);
        assertThat(err.toString()).contains("n9 holds no replica of group 3");
        move[7] = "n2";
        // Not yet a member of the metadata group: refused, and the command says what to run.
        assertThat(run(move)).isEqualTo(1);
        assertThat(err.toString()).contains("idem group add --group 0 --id n4");
        assertThat(
                run(
                    "group",
                    "add",
                    "--servers",
                    servers,
                    "--group",
                    "0",
                    "--id",
                    "n4",
                    "--raft-address",
                    c4.self().raftAddress(),
                    "--client-address",
                    c4.self().clientAddress()))
            .as("stderr: %s", err)
            .isZero();
        assertThat(out.toString()).contains("adding n4 in group 0 committed");
        assertThat(run(move)).as("stderr: %s", err).isZero();
        assertThat(out.toString())
            .contains("adding n4 in group 3 committed")
            .contains("removing n2 in group 3 committed");
        out.getBuffer().setLength(0);
        assertThat(run("group", "members", "--servers", servers, "--group", "3"))
            .as("stderr: %s", err)
            .isZero();
        assertThat(out.toString()).contains(" n4=").doesNotContain(" n2=");
        out.getBuffer().setLength(0);
        assertThat(run("group", "members", "--servers", servers, "--group", "1")).isZero();
        assertThat(out.toString()).contains(" n2=").doesNotContain(" n4=");
        assertThat(n4.groupNumbers()).hasSize(4);
      }
    }
  }
}
