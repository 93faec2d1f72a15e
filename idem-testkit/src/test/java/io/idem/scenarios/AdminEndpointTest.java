package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.testkit.LocalCluster;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The admin endpoint of a real three-node cluster: {@code /metrics} after known operations, and the
 * status page's JSON.
 */
@Timeout(120)
class AdminEndpointTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static int leader;
  static IdemClient client;
  static final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  @BeforeAll
  static void start() throws Exception {
    cluster = LocalCluster.start(3, dir, b -> b.adminAddress("127.0.0.1:0"));
    leader = cluster.waitForLeader(Duration.ofSeconds(30));
    // Kept open: its session is live while the tests read the metrics.
    client = IdemClient.builder().servers(cluster.clientAddresses()).build();
    {
      IdemClient c = client;
      for (int i = 0; i < 5; i++) {
        c.put("k" + i, "v" + i);
      }
      c.increment("n", 1);
      c.increment("n", 1);
      assertThat(c.compareAndSet("k0", 99, "x".getBytes(StandardCharsets.UTF_8)).written())
          .isFalse();
      c.acquireKey(
          "tenant",
          "order-1",
          "f".getBytes(StandardCharsets.UTF_8),
          Duration.ofSeconds(30),
          Duration.ofHours(1));
    }
  }

  @AfterAll
  static void stop() {
    client.close();
    cluster.close();
  }

  static String get(int node, String path) throws Exception {
    HttpResponse<String> r =
        http.send(
            HttpRequest.newBuilder(
                    URI.create("http://127.0.0.1:" + cluster.node(node).adminPort() + path))
                .timeout(Duration.ofSeconds(10))
                .build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).as(path).isEqualTo(200);
    return r.body();
  }

  /** The value of the sample {@code name{labels...}} in a Prometheus exposition. */
  static double sample(String exposition, String name, String... labels) {
    for (String line : exposition.split("\n")) {
      if (!line.startsWith(name + "{") && !line.startsWith(name + " ")) {
        continue;
      }
      boolean all = true;
      for (String label : labels) {
        all &= line.contains(label);
      }
      if (all) {
        Matcher m = Pattern.compile(" ([0-9.eE+-]+)$").matcher(line);
        assertThat(m.find()).as(line).isTrue();
        return Double.parseDouble(m.group(1));
      }
    }
    throw new AssertionError("no sample " + name + " with " + String.join(",", labels));
  }

  @Test
  void theLeadersMetricsCountTheOperationsItAnswered() throws Exception {
    String m = get(leader, "/metrics");
    String node = "node=\"n" + (leader + 1) + "\"";
    assertThat(sample(m, "idem_writes_total", "kind=\"put\"", node)).isEqualTo(5);
    assertThat(sample(m, "idem_writes_total", "kind=\"increment\"", node)).isEqualTo(2);
    assertThat(sample(m, "idem_writes_total", "kind=\"acquire_key\"", node)).isEqualTo(1);
    assertThat(sample(m, "idem_rejections_total", "code=\"CAS_MISMATCH\"", node)).isEqualTo(1);
    assertThat(sample(m, "idem_rejections_total", "code=\"WRONG_TYPE\"", node)).isZero();
    assertThat(sample(m, "idem_sessions_live", node)).isEqualTo(1);
    assertThat(sample(m, "idem_key_records", node)).isEqualTo(1);
    assertThat(sample(m, "idem_kv_keys", node)).isEqualTo(6);
    assertThat(sample(m, "idem_leases", node)).isZero();
    assertThat(sample(m, "idem_duplicates_suppressed_total", node)).isZero();
    assertThat(sample(m, "idem_raft_role", "role=\"leader\"", node)).isEqualTo(1);
    assertThat(sample(m, "idem_raft_role", "role=\"follower\"", node)).isZero();
    assertThat(sample(m, "idem_raft_term", node)).isPositive();
    assertThat(sample(m, "idem_raft_commit_index", node))
        .isGreaterThanOrEqualTo(sample(m, "idem_raft_applied_index", node) - 1);
    assertThat(sample(m, "idem_apply_seconds_count", node)).isPositive();
    assertThat(sample(m, "idem_entry_commands_count", node)).isPositive();
    assertThat(m).contains("# TYPE idem_apply_seconds histogram");
    // Buckets up to the most commands an entry applies (4096), not up to 2^62.
    List<String> buckets =
        m.lines()
            .filter(l -> l.startsWith("idem_entry_commands_bucket{") && l.contains(node))
            .toList();
    assertThat(buckets).hasSizeLessThan(80).anyMatch(l -> l.contains("le=\"4096.0\""));
    assertThat(buckets.get(buckets.size() - 2)).contains("le=\"4096.0\"");
  }

  @Test
  void theStatusReplyCountsKvKeysAndKeyRecordsApart() {
    try (IdemClient c = IdemClient.builder().servers(cluster.clientAddress(leader)).build()) {
      ClusterStatus s = c.status();
      assertThat(s.id()).isEqualTo("n" + (leader + 1));
      assertThat(s.keys()).as("k0..k4 and n").isEqualTo(6);
      assertThat(s.keyRecords()).as("tenant/order-1").isEqualTo(1);
    }
  }

  @Test
  void aFollowerAnsweredNoWritesButAppliedTheSameState() throws Exception {
    int follower = (leader + 1) % 3;
    String node = "node=\"n" + (follower + 1) + "\"";
    // A follower learns the commit index with the next append or heartbeat, so it may not have
    // applied the last operations yet: wait, bounded, for the acquire (the last one) to show.
    String m = get(follower, "/metrics");
    long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
    while (sample(m, "idem_key_records", node) == 0 && System.nanoTime() < deadline) {
      Thread.sleep(50);
      m = get(follower, "/metrics");
    }
    assertThat(sample(m, "idem_writes_total", "kind=\"put\"", node)).isZero();
    assertThat(sample(m, "idem_raft_role", "role=\"follower\"", node)).isEqualTo(1);
    assertThat(sample(m, "idem_key_records", node)).isEqualTo(1);
    assertThat(sample(m, "idem_sessions_live", node)).isEqualTo(1);
  }

  @Test
  void theStatusJsonShowsEveryMemberAndOneLeader() throws Exception {
    JsonNode s = new ObjectMapper().readTree(get((leader + 2) % 3, "/api/status"));
    assertThat(s.get("nodes")).hasSize(3);
    int leaders = 0;
    for (JsonNode n : s.get("nodes")) {
      assertThat(n.get("reachable").asBoolean()).as(n.toString()).isTrue();
      assertThat(n.get("appliedIndex").asLong()).isPositive();
      leaders += n.get("role").asText().equals("LEADER") ? 1 : 0;
    }
    assertThat(leaders).isEqualTo(1);
    assertThat(s.get("leader").asText()).isEqualTo("n" + (leader + 1));
    assertThat(s.get("largestSessions")).hasSize(1);
    assertThat(get(leader, "/")).contains("<title>Idem status</title>");
  }

  /**
   * The status page in a real browser: headless Chromium (Debian's, installed by run-tests) loads
   * it from a follower, runs its script against the live cluster, and the DOM it leaves shows every
   * member, the one leader and the session. The screenshot is kept in target/ as a build artefact.
   */
  @Test
  void theStatusPageShowsTheClusterInABrowser() throws Exception {
    int follower = (leader + 1) % 3;
    String url = "http://127.0.0.1:" + cluster.node(follower).adminPort() + "/";
    String dom = Chromium.run(dir, "--dump-dom", url);
    assertThat(dom).contains("data-loaded=\"true\"");
    for (int i = 1; i <= 3; i++) {
      assertThat(dom).contains("<tr data-node=\"n" + i + "\"");
    }
    assertThat(dom).contains("<tr data-node=\"n" + (leader + 1) + "\" class=\"leader\">");
    assertThat(dom.split("<td>LEADER</td>", -1)).hasSize(2);
    assertThat(dom).contains("3 of 3 members reachable").contains("leader: n" + (leader + 1));
    assertThat(dom).doesNotContain("<td class=\"down\">");
    // Two polls a second apart made the rates; the client's session is listed.
    assertThat(dom).containsPattern("id=\"rate-applied\" class=\"muted\"> [0-9]+<");
    assertThat(dom)
        .containsPattern(
            "<table id=\"sessions\">[\\s\\S]*<tbody><tr><td>\\(unnamed\\)</td><td>[0-9]+</td>");
    Path shot = Path.of("target", "status-page.png").toAbsolutePath();
    java.nio.file.Files.deleteIfExists(shot);
    Chromium.run(dir, "--screenshot=" + shot, "--window-size=1200,1000", url);
    assertThat(shot).isNotEmptyFile();
  }
}
