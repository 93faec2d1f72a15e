package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.ClusterStatus;
import io.idem.client.FencedException;
import io.idem.client.IdemClient;
import io.idem.client.InvalidArgumentException;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeySettlement;
import io.idem.client.NotSentException;
import io.idem.client.Write;
import io.idem.proto.Code;
import io.idem.proto.Operation;
import io.idem.proto.Partitions;
import io.idem.proto.Put;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.server.IdemServer;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A cluster of several Raft groups ({@code groups(4)} on three nodes): each data group holds the
 * partitions the map gives it and nothing else, a client holds one id from the metadata group and a
 * session with its own numbers in each data group it writes to, a request that reaches the wrong
 * group is refused with the map and applied nowhere, and a restarted client resumes every group's
 * session from its identity files and fences the old instance in each.
 */
@Timeout(240)
class GroupsTest {
  private static final int GROUPS = 4;

  @TempDir Path dir;

  private static byte[] v(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static LocalCluster cluster(Path dir) {
    return LocalCluster.start(3, dir, b -> b.groups(GROUPS).adminAddress("127.0.0.1:0"));
  }

  /** A key of {@code group}: the first "prefix-i" whose partition the first map gives it. */
  private static String keyOf(String prefix, int group) {
    for (int i = 0; ; i++) {
      String k = prefix + "-" + i;
      if (Partitions.groupOf(Partitions.of(k), GROUPS) == group) {
        return k;
      }
    }
  }

  private static long keysIn(LocalCluster c, int node, int group) {
    return c.node(node).groupNumbers().contains(group) ? statusOf(c, node, group).getKeys() : -1;
  }

  private static StatusReply statusOf(LocalCluster c, int node, int group) {
    try (RawSession raw = new RawSession(c.clientAddress(node), group)) {
      return raw.status();
    }
  }

  @Test
  void writesSpreadOverTheGroupsAndEachGroupHoldsOnlyItsPartitions() throws Exception {
    try (LocalCluster c = cluster(dir);
        IdemClient client = IdemClient.builder().servers(c.clientAddresses()).build()) {
      assertThat(c.node(0).groupNumbers()).containsExactly(0, 1, 2, 3, 4);
      int n = 200;
      List<CompletableFuture<?>> writes = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        writes.add(client.putAsync("k-" + i, v("v" + i), null));
      }
      CompletableFuture.allOf(writes.toArray(CompletableFuture[]::new)).join();
      for (int i = 0; i < n; i += 17) {
        assertThat(client.get("k-" + i))
            .get()
            .extracting(kv -> new String(kv.value()))
            .isEqualTo("v" + i);
      }
      long[] expected = new long[GROUPS + 1];
      for (int i = 0; i < n; i++) {
        expected[Partitions.groupOf(Partitions.of("k-" + i), GROUPS)]++;
      }
      for (int g = 1; g <= GROUPS; g++) {
        int group = g;
        assertThat(expected[g]).as("the test's keys reach group %d", g).isPositive();
        Eventually.until(
            "every node's group " + g + " holds its " + expected[g] + " keys",
            Duration.ofSeconds(20),
            () -> {
              for (int node = 0; node < 3; node++) {
                if (keysIn(c, node, group) != expected[group]) {
                  return false;
                }
              }
              return true;
            },
            () -> "keys " + keysIn(c, 0, group) + ", " + keysIn(c, 1, group));
      }
      assertThat(statusOf(c, 0, 0).getKeys()).as("the metadata group holds no key").isZero();
      // The node's gauges count every group's replica, not data group 1's alone.
      assertThat(c.node(0).meterRegistry().get("idem.kv.keys").gauge().value()).isEqualTo(n);
      // One id everywhere: the metadata group's session, and one session under it per data group.
      StatusReply meta = statusOf(c, 0, 0);
      assertThat(meta.getLiveSessions()).isEqualTo(1);
      assertThat(meta.getGroupsList()).hasSize(GROUPS + 1);
      assertThat(meta.getMap().getGroupCount()).isEqualTo(GROUPS);
      assertThat(meta.getMap().getGroupsList()).hasSize(Partitions.COUNT);
      // Leaders spread: each group prefers another node, so three nodes all lead something.
      Eventually.until(
          "group leaders on every node",
          Duration.ofSeconds(30),
          () -> leaders(c).size() == 3,
          () -> "leaders " + leaders(c));
      // The Raft gauges are per group: one leader in each, the metadata group's included, and a
      // term and applied index for every replica.
      for (int g = 0; g <= GROUPS; g++) {
        int group = g;
        Eventually.until(
            "one leader of group " + g + " by the idem.raft.role gauges",
            Duration.ofSeconds(30),
            () -> raftGauge(c, "idem.raft.role", group, "leader") == 1);
        for (int node = 0; node < 3; node++) {
          io.micrometer.core.instrument.MeterRegistry r = c.node(node).meterRegistry();
          String tag = Integer.toString(g);
          assertThat(r.get("idem.raft.term").tag("group", tag).gauge().value()).isPositive();
          assertThat(r.get("idem.raft.applied.index").tag("group", tag).gauge().value())
              .isPositive();
        }
      }
      // The status page, in a browser, shows every node's replica of every group, one leader each.
      String dom =
          Chromium.run(dir, "--dump-dom", "http://127.0.0.1:" + c.node(1).adminPort() + "/");
      assertThat(dom)
          .contains("data-loaded=\"true\"")
          .contains("<h2 id=\"groups-title\">")
          .contains("leader of data group 1: n");
      for (int g = 0; g <= GROUPS; g++) {
        for (int node = 1; node <= 3; node++) {
          assertThat(dom).contains("<tr data-group=\"" + g + "\" data-node=\"n" + node + "\"");
        }
        Matcher leader =
            Pattern.compile("<tr data-group=\"" + g + "\" data-node=\"n[0-9]\" class=\"leader\">")
                .matcher(dom);
        assertThat(leader.results().count()).as("group %d's leaders on the page", g).isEqualTo(1);
      }
    }
  }

  /** A Raft role gauge of group {@code g}, summed over the nodes. */
  private static double raftGauge(LocalCluster c, String name, int g, String role) {
    double sum = 0;
    for (int node = 0; node < 3; node++) {
      sum +=
          c.node(node)
              .meterRegistry()
              .get(name)
              .tag("group", Integer.toString(g))
              .tag("role", role)
              .gauge()
              .value();
    }
    return sum;
  }

  private static Set<Integer> leaders(LocalCluster c) {
    Set<Integer> nodes = new HashSet<>();
    for (int node = 0; node < 3; node++) {
      IdemServer s = c.node(node);
      for (int g = 1; g <= GROUPS; g++) {
        if (s != null && s.isLeader(g)) {
          nodes.add(node);
        }
      }
    }
    return nodes;
  }

  /**
   * A node killed before its replicas applied their groups' first configuration entry (each
   * replica's storage holds at most a term and a vote: the groups were still electing their first
   * leaders, as on a loaded machine at start) rejoins every group when it restarts. Found by the
   * 8-group campaign: Ratis recovered such a replica with an empty configuration, it found itself
   * in none at its first election timeout and closed for good ({@code NOT_IN_CONF}), and the group
   * ran on two replicas until the next fault took its majority.
   */
  @Test
  void aNodeKilledBeforeItsGroupsFirstConfigurationRejoinsEveryGroup() throws Exception {
    try (LocalCluster c =
        LocalCluster.unstarted(3, dir, b -> b.groups(GROUPS).adminAddress("127.0.0.1:0"))) {
      // Node 0 alone creates its replicas and, with no peer to answer, elects no leader: no
      // replica's storage holds a configuration.
      c.restart(0);
      Thread.sleep(3_000);
      c.kill(0);
      try (var dirs = Files.list(dir.resolve("n1"))) {
        List<Path> replicas = dirs.filter(d -> Files.isDirectory(d.resolve("current"))).toList();
        assertThat(replicas).hasSize(GROUPS + 1);
        assertThat(replicas)
            .noneMatch(d -> Files.exists(d.resolve("current").resolve("raft-meta.conf")));
      }
      c.restart(0);
      // Restarted, every replica has the configured peers as its configuration. (Recovered with an
      // empty one, every group but the one given to Ratis's builder had none.)
      for (int g = 0; g <= GROUPS; g++) {
        assertThat(statusOf(c, 0, g).getMembersList())
            .as("group %d's members on node 0", g)
            .extracting(m -> m.getId())
            .containsExactlyInAnyOrder("n1", "n2", "n3");
      }
      c.restart(1);
      c.restart(2);
      try (IdemClient client =
          IdemClient.builder()
              .servers(c.clientAddresses())
              .requestTimeout(Duration.ofSeconds(30))
              .build()) {
        for (int g = 0; g <= GROUPS; g++) {
          if (g > 0) {
            client.append(keyOf("rejoin", g), v("x"));
          }
          int group = g;
          leaderOf(c, group);
          long leaderApplied = statusOf(c, leaderIndex(c, group), group).getAppliedIndex();
          Eventually.until(
              "node 0's replica of group " + g + " reaches the leader's applied index",
              Duration.ofSeconds(30),
              () -> {
                try {
                  return statusOf(c, 0, group).getAppliedIndex() >= leaderApplied;
                } catch (RuntimeException e) {
                  return false;
                }
              },
              () ->
                  "node 0 says " + statusOf(c, 0, group).getRole() + ", leader's " + leaderApplied);
        }
      }
    }
  }

  @Test
  void aRequestInTheWrongGroupIsRefusedWithTheMapAndAppliedNowhere() throws Exception {
    try (LocalCluster c = cluster(dir)) {
      String leader0 = leaderOf(c, 0);
      RegisterReply id = registered(leader0, 0, RegisterRequest.newBuilder().setTtlMs(60_000));
      String key3 = keyOf("misplaced", 3);
      String leader2 = leaderOf(c, 2);
      try (RawSession g2 = new RawSession(leader2, 2)) {
        // Without the metadata group's id: refused before anything is logged.
        assertThat(g2.register(RegisterRequest.newBuilder().setTtlMs(60_000).build()).getCode())
            .isEqualTo(Code.INVALID_ARGUMENT);
        // With another secret: the metadata group's check refuses it.
        RegisterReply stolen =
            g2.register(
                RegisterRequest.newBuilder()
                    .setTtlMs(60_000)
                    .setClientId(id.getClientId())
                    .setEpoch(id.getEpoch())
                    .setSecretHi(id.getSecretHi() + 1)
                    .setSecretLo(id.getSecretLo())
                    .build());
        assertThat(stolen.getCode()).isEqualTo(Code.UNAUTHENTICATED);
        RegisterReply grant =
            registered(
                leader2,
                2,
                RegisterRequest.newBuilder()
                    .setTtlMs(60_000)
                    .setClientId(id.getClientId())
                    .setEpoch(id.getEpoch())
                    .setSecretHi(id.getSecretHi())
                    .setSecretLo(id.getSecretLo())
                    .setFirstSeq(7));
        assertThat(grant.getClientId()).isEqualTo(id.getClientId());
        assertThat(grant.getNextSeq()).as("numbers start at first_seq").isEqualTo(7);
        assertThat(grant.getMap().getGroupCount()).isEqualTo(GROUPS);
        g2.open(grant);
        g2.send(
            7,
            7,
            Operation.newBuilder()
                .setPut(
                    Put.newBuilder()
                        .setKey(key3)
                        .setValue(com.google.protobuf.ByteString.copyFromUtf8("x")))
                .build());
        ServerFrame f = g2.answerTo(7);
        assertThat(f.getResult().getCode()).isEqualTo(Code.WRONG_GROUP);
        assertThat(f.getResult().getMap().getGroups(Partitions.of(key3))).isEqualTo(3);
        assertThat(g2.get(key3).getCode()).as("a read too").isEqualTo(Code.WRONG_GROUP);
      }
      for (int g = 1; g <= GROUPS; g++) {
        assertThat(statusOf(c, 0, g).getKeys()).as("group %d holds no key", g).isZero();
      }
    }
  }

  /** A registration in {@code group} at {@code address}, retried while its leader gets ready. */
  private static RegisterReply registered(
      String address, int group, RegisterRequest.Builder request) {
    RegisterReply[] last = new RegisterReply[1];
    Eventually.until(
        "registered in group " + group,
        Duration.ofSeconds(30),
        () -> {
          try (RawSession raw = new RawSession(address, group)) {
            last[0] = raw.register(request.setNonce(7).build());
          }
          return last[0].getCode() == Code.OK;
        },
        () -> String.valueOf(last[0]));
    return last[0];
  }

  private static String leaderOf(LocalCluster c, int group) {
    Eventually.until(
        "group " + group + " has a leader",
        Duration.ofSeconds(30),
        () -> leaderIndex(c, group) >= 0,
        () -> "none");
    return c.clientAddress(leaderIndex(c, group));
  }

  private static int leaderIndex(LocalCluster c, int group) {
    for (int i = 0; i < c.size(); i++) {
      if (c.node(i) != null && c.node(i).isLeader(group)) {
        return i;
      }
    }
    return -1;
  }

  @Test
  void oneCallTouchesOneGroupAndHashTagsKeepRelatedNamesTogether() {
    try (LocalCluster c = cluster(dir);
        IdemClient client = IdemClient.builder().servers(c.clientAddresses()).build()) {
      String scope = "payments";
      String far = keyOf("{acct-9}:balance", 1);
      KeyAcquisition a =
          client.acquireKey(
              scope, "{acct-7}:req-1", v("fp"), Duration.ofSeconds(30), Duration.ofMinutes(5));
      long token = ((KeyAcquisition.Acquired) a).token();
      if (Partitions.groupOf(Partitions.of(far), GROUPS)
          != Partitions.groupOf(Partitions.ofKey(scope, "{acct-7}:req-1"), GROUPS)) {
        assertThatThrownBy(
                () ->
                    client.completeKey(
                        scope, "{acct-7}:req-1", token, v("ok"), Write.increment(far, 5)))
            .isInstanceOf(InvalidArgumentException.class)
            .hasMessageContaining("another Raft group");
      }
      KeySettlement done =
          client.completeKey(
              scope, "{acct-7}:req-1", token, v("ok"), Write.increment("{acct-7}:balance", 5));
      assertThat(done).isInstanceOf(KeySettlement.Settled.class);
      assertThat(client.get("{acct-7}:balance"))
          .get()
          .extracting(kv -> new String(kv.value()))
          .isEqualTo("5");
    }
  }

  @Test
  void aGroupsStatusAndMembershipCallsOpenNoSessionInThatGroup() throws Exception {
    Path identity = dir.resolve("admin.id");
    try (LocalCluster c = cluster(dir.resolve("cluster"));
        IdemClient client =
            IdemClient.builder()
                .servers(c.clientAddresses())
                .identity(identity, "admin")
                .requestTimeout(Duration.ofSeconds(30))
                .build()) {
      for (int g = 1; g <= GROUPS; g++) {
        ClusterStatus s = client.status(g);
        assertThat(s.members()).as("group %d's members", g).hasSize(3);
        assertThat(s.liveSessions()).as("sessions in group %d", g).isZero();
        int group = g;
        // Refused (no such member), after finding the group's leader.
        assertThatThrownBy(
                () -> client.changeMembers(group, List.of(), List.of("n9"), Duration.ofSeconds(10)))
            .isInstanceOf(InvalidArgumentException.class)
            .hasMessageContaining("no member n9");
      }
      for (int g = 1; g <= GROUPS; g++) {
        assertThat(identity.resolveSibling("admin.id.group-" + g)).doesNotExist();
        assertThat(client.status(g).liveSessions()).as("sessions in group %d", g).isZero();
      }
    }
  }

  @Test
  void aRestartedClientResumesEveryGroupAndFencesTheOldInstanceInEach() throws Exception {
    Path identity = dir.resolve("client.id");
    try (LocalCluster c = cluster(dir.resolve("cluster"))) {
      IdemClient old =
          IdemClient.builder()
              .servers(c.clientAddresses())
              .identity(identity, "worker")
              .requestTimeout(Duration.ofSeconds(30))
              .build();
      List<String> lists = new ArrayList<>();
      for (int g = 1; g <= GROUPS; g++) {
        lists.add(keyOf("list", g));
      }
      for (String list : lists) {
        for (int i = 0; i < 5; i++) {
          old.append(list, v("old-" + i));
        }
      }
      long id = old.clientId();
      for (int g = 1; g <= GROUPS; g++) {
        assertThat(identity.resolveSibling("client.id.group-" + g)).exists();
      }
      IdemClient fresh =
          IdemClient.builder()
              .servers(c.clientAddresses())
              .identity(identity, "worker")
              .requestTimeout(Duration.ofSeconds(30))
              .build();
      try {
        assertThat(fresh.clientId()).isEqualTo(id);
        assertThat(fresh.epoch()).isGreaterThan(0);
        // The old instance is fenced in every group it wrote to, before the new one writes there.
        for (String list : lists) {
          assertThatThrownBy(() -> old.append(list, v("late")))
              .satisfiesAnyOf(
                  e -> assertThat(e).isInstanceOf(FencedException.class),
                  e ->
                      assertThat(e)
                          .isInstanceOf(NotSentException.class)
                          .hasCauseInstanceOf(FencedException.class));
        }
        for (String list : lists) {
          assertThat(fresh.append(list, v("new"))).isEqualTo(6);
        }
        for (String list : lists) {
          assertThat(fresh.get(list).get().elements()).hasSize(6);
        }
      } finally {
        fresh.close();
        old.close();
      }
      assertThat(Files.exists(identity)).isTrue();
    }
  }

  /**
   * A client built while every node is down cannot know the cluster's shape. It waits for the first
   * node that answers, then opens its sessions the way a cluster of several groups needs (a guess
   * of one group would be refused for good: "register in the metadata group first"), resumes its
   * previous instance's sessions, and sends the calls made meanwhile in their order.
   */
  @Test
  void aClientBuiltWhileEveryNodeIsDownOpensItsSessionsOnceANodeAnswers() throws Exception {
    Path identity = dir.resolve("late.id");
    try (LocalCluster c = cluster(dir.resolve("cluster"))) {
      String list = keyOf("late-list", 3);
      String key = keyOf("late-key", 1);
      long id;
      try (IdemClient first =
          IdemClient.builder()
              .servers(c.clientAddresses())
              .identity(identity, "late")
              .requestTimeout(Duration.ofSeconds(30))
              .build()) {
        first.put(key, v("before"));
        first.append(list, v("a0"));
        id = first.clientId();
      }
      for (int i = 0; i < 3; i++) {
        c.kill(i);
      }
      try (IdemClient late =
          IdemClient.builder()
              .servers(c.clientAddresses())
              .identity(identity, "late")
              .requestTimeout(Duration.ofSeconds(60))
              .build()) {
        assertThat(late.clientId()).as("no session before a node answers").isZero();
        List<CompletableFuture<Long>> appends = new ArrayList<>();
        for (int i = 1; i <= 5; i++) {
          appends.add(late.appendAsync(list, v("a" + i)));
        }
        CompletableFuture<java.util.Optional<io.idem.client.KeyValue>> read = late.getAsync(key);
        Thread.sleep(500);
        assertThat(appends).noneMatch(CompletableFuture::isDone);
        for (int i = 0; i < 3; i++) {
          c.restart(i);
        }
        for (int i = 0; i < 5; i++) {
          assertThat(appends.get(i).get(60, java.util.concurrent.TimeUnit.SECONDS))
              .as("the calls made while no node answered go in their order")
              .isEqualTo(i + 2);
        }
        assertThat(
                read.get(60, java.util.concurrent.TimeUnit.SECONDS).orElseThrow().valueAsString())
            .isEqualTo("before");
        assertThat(late.clientId()).as("the previous instance's id, resumed").isEqualTo(id);
        assertThat(identity.resolveSibling("late.id.group-3")).exists();
        assertThat(late.get(list).orElseThrow().elements()).hasSize(6);
      }
    }
  }
}
