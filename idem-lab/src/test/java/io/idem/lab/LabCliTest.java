package io.idem.lab;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The lab's commands (demo, bench, verify) on the command line: their settings are checked before
 * anything starts, errors are one line with a non-zero exit, and the runs they make are real.
 */
@Timeout(60)
class LabCliTest {
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  /** The client address of the node {@link #startNode} started. */
  private String servers;

  private int run(String... args) {
    return IdemLab.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(args);
  }

  /** The lines idem printed to standard output. */
  private String[] outLines() {
    return out.toString().strip().split("[\\r\\n]+");
  }

  /** The {@code ops} of a bench's JSON line; fails if it has none. */
  private static long ops(String json) {
    Matcher ops = Pattern.compile("\"ops\":(\\d+),").matcher(json);
    assertThat(ops.find()).as(json).isTrue();
    return Long.parseLong(ops.group(1));
  }

  private void assertOneLineError(String contains) {
    String e = err.toString().strip();
    assertThat(e).contains(contains);
    assertThat(e.lines().count()).as("error lines: %s", e).isEqualTo(1);
    assertThat(e).doesNotContain("\tat ").doesNotContain("Exception:");
  }

  /**
   * Runs a command that must fail with {@code code} and one line on stderr containing {@code e}.
   */
  private void fails(int code, String e, String... args) {
    out.getBuffer().setLength(0);
    err.getBuffer().setLength(0);
    assertThat(run(args)).as("%s: %s", String.join(" ", args), err).isEqualTo(code);
    assertOneLineError(e);
  }

  private static int freePort() throws java.io.IOException {
    try (java.net.ServerSocket s =
        new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }

  /** A one-node cluster in {@code dir}, its client address in {@code servers}. */
  private IdemServer startNode(Path dir) throws Exception {
    int raft = freePort();
    servers = "127.0.0.1:" + freePort();
    return IdemServer.start(
        ServerConfig.builder()
            .dataDir(dir.resolve("data"))
            .peers(List.of(new ServerConfig.Peer("n1", "127.0.0.1:" + raft, servers)))
            .build());
  }

  @Test
  void demoRefusesAnAbsurdDuration() throws Exception {
    assertThat(run("demo", "--seconds", "1")).isEqualTo(2);
  }

  @Test
  void demoPaymentsRefusesAbsurdSettingsInOneLine() {
    assertThat(run("demo", "payments", "--seconds", "1")).isEqualTo(2);
    assertOneLineError("seconds must be in [8, 600], got 1");
    err.getBuffer().setLength(0);
    assertThat(run("demo", "payments", "--clients", "0")).isEqualTo(2);
    assertOneLineError("clients must be in [1, 64], got 0");
  }

  @Test
  void benchRefusesOutOfRangeSettingsAndUnreachableServers() {
    assertThat(run("bench", "--sessions", "0")).isEqualTo(2);
    assertThat(run("bench", "--workload", "delete")).isEqualTo(2);
    assertThat(run("bench", "--servers", "127.0.0.1:9", "--timeout", "1s", "--duration", "1s"))
        .isEqualTo(1);
    assertThat(err.toString()).contains("idem:").doesNotContain("\tat ");
  }

  @Test
  void benchKeysWorkloadAcquiresAndCompletesNewKeys(@TempDir Path dir) throws Exception {
    Path timeline = dir.resolve("timeline.csv");
    assertThat(
            run(
                "bench",
                "--local",
                "1",
                "--workload",
                "keys",
                "--sessions",
                "4",
                "--window",
                "8",
                "--warmup",
                "1s",
                "--duration",
                "3s",
                "--timeline",
                timeline.toString()))
        .as(err.toString())
        .isZero();
    String[] lines = outLines();
    String json = lines[lines.length - 1];
    assertThat(json)
        .startsWith("{")
        .contains("\"workload\":\"keys\"")
        .containsPattern("\"errors\":0[,}]");
    long total = ops(json);
    assertThat(total).isPositive();
    assertThat(out.toString()).contains("keyed operations/s");

    // One line per second of the measured window; together they are every operation measured.
    List<String> csv = Files.readAllLines(timeline);
    assertThat(csv.get(0)).startsWith("# idem keys");
    assertThat(csv.get(1)).isEqualTo("time,ops,p50_ms,p99_ms,max_ms");
    List<String[]> seconds = csv.stream().skip(2).map(l -> l.split(",")).toList();
    assertThat(seconds).hasSizeBetween(2, 5);
    long sum = 0;
    for (String[] f : seconds) {
      assertThat(Instant.parse(f[0])).isBefore(Instant.now());
      sum += Long.parseLong(f[1]);
      double p50 = Double.parseDouble(f[2]);
      double p99 = Double.parseDouble(f[3]);
      double max = Double.parseDouble(f[4]);
      assertThat(p50).isLessThanOrEqualTo(p99);
      assertThat(p99).isLessThanOrEqualTo(max);
    }
    assertThat(sum).isEqualTo(total);
  }

  @Test
  void benchGetWorkloadReadsKeysWrittenBeforeTheRunAtAGivenRate() {
    assertThat(
            run(
                "bench",
                "--local",
                "1",
                "--workload",
                "get",
                "--sessions",
                "4",
                "--rate",
                "200",
                "--warmup",
                "1s",
                "--duration",
                "3s"))
        .as(err.toString())
        .isZero();
    String[] lines = outLines();
    String json = lines[lines.length - 1];
    // Every read found its key (a read that found none counts as an error) and the rate held.
    assertThat(json)
        .contains("\"workload\":\"get\"")
        .contains("\"short\":false")
        .containsPattern("\"errors\":0[,}]");
    assertThat(ops(json)).isBetween(500L, 700L);
    assertThat(out.toString()).contains("reads/s");
  }

  @Test
  void benchRefusesATimelineItCannotWriteBeforeItStarts(@TempDir Path dir) {
    assertThat(run("bench", "--local", "1", "--timeline", dir.resolve("no/such/t.csv").toString()))
        .isEqualTo(2);
    assertOneLineError("--timeline");
    assertThat(run("bench", "--local", "1", "--timeline", dir.toString())).isEqualTo(2);
    assertThat(out.toString()).doesNotContain("writes/s");
  }

  @Test
  void benchKeysWorkloadRefusesResponsesOverTheBound() {
    assertThat(run("bench", "--workload", "keys", "--value-size", "65537")).isEqualTo(2);
    assertOneLineError("at most 65536");
  }

  @Test
  void benchKeysOnTheRedisStoreAndOnSeed001RunOnAPrivateRedisServerStoppedAfterwards() {
    for (String store : List.of("redis", "seed001")) {
      out.getBuffer().setLength(0);
      assertThat(
              run(
                  "bench",
                  "--workload",
                  "keys",
                  "--store",
                  store,
                  "--appendfsync",
                  "always",
                  "--sessions",
                  "2",
                  "--window",
                  "4",
                  "--warmup",
                  "1s",
                  "--duration",
                  "2s"))
          .as(err.toString())
          .isZero();
      String[] lines = outLines();
      assertThat(lines[0])
          .startsWith(store + " on a private redis-server")
          .contains("appendfsync always");
      String json = lines[lines.length - 1];
      assertThat(json)
          .startsWith("{\"target\":\"" + store + "\"")
          .contains("\"workload\":\"keys\"")
          .containsPattern("\"errors\":0[,}]");
      assertThat(ops(json)).isPositive();
      Matcher pid = Pattern.compile("\\(pid (\\d+),").matcher(lines[0]);
      assertThat(pid.find()).as(lines[0]).isTrue();
      assertThat(ProcessHandle.of(Long.parseLong(pid.group(1))).map(ProcessHandle::isAlive))
          .as("the private redis-server is stopped")
          .isNotEqualTo(java.util.Optional.of(true));
    }
  }

  @Test
  void benchKeysOnThePostgresStoreRunsOnAPrivateServerChecksTheDatabaseAndStopsIt() {
    for (String mode : List.of("transactional", "standard")) {
      out.getBuffer().setLength(0);
      assertThat(
              run(
                  "bench",
                  "--workload",
                  "keys",
                  "--store",
                  "postgres",
                  "--pg-mode",
                  mode,
                  "--pg-pool",
                  "4",
                  "--sessions",
                  "2",
                  "--window",
                  "4",
                  "--warmup",
                  "1s",
                  "--duration",
                  "2s"))
          .as(err.toString())
          .isZero();
      String[] lines = outLines();
      assertThat(lines[0])
          .startsWith("postgres (" + mode + " mode) on a private PostgreSQL")
          .contains("fsync=on")
          .contains("pool 4, 8 lanes");
      String json = lines[lines.length - 2];
      assertThat(json)
          .startsWith("{\"target\":\"postgres\"")
          .contains("\"workload\":\"keys\"")
          .containsPattern("\"errors\":0[,}]");
      long measured = ops(json);
      assertThat(measured).isPositive();
      // Every acknowledged operation (warm-up included) left one completed key, and one payment
      // in the transactional mode only.
      Matcher checked =
          Pattern.compile("^checked: (\\d+) acknowledged, (\\d+) completed keys, (\\d+) payments$")
              .matcher(lines[lines.length - 1]);
      assertThat(checked.find()).as(lines[lines.length - 1]).isTrue();
      long acknowledged = Long.parseLong(checked.group(1));
      assertThat(acknowledged).isGreaterThanOrEqualTo(measured);
      assertThat(Long.parseLong(checked.group(2))).isEqualTo(acknowledged);
      assertThat(Long.parseLong(checked.group(3)))
          .isEqualTo(mode.equals("transactional") ? acknowledged : 0);
      Matcher pid = Pattern.compile("\\(pid (\\d+)\\)").matcher(lines[0]);
      assertThat(pid.find()).as(lines[0]).isTrue();
      assertThat(ProcessHandle.of(Long.parseLong(pid.group(1))).map(ProcessHandle::isAlive))
          .as("the private PostgreSQL is stopped")
          .isNotEqualTo(java.util.Optional.of(true));
    }
  }

  @Test
  void benchRunsSeveralStoresSideBySideInAlternatingRounds() {
    assertThat(
            run(
                "bench",
                "--workload",
                "keys",
                "--store",
                "redis,seed001",
                "--rounds",
                "2",
                "--sessions",
                "2",
                "--window",
                "2",
                "--warmup",
                "1s",
                "--duration",
                "1s"))
        .as(err.toString())
        .isZero();
    String text = out.toString();
    // Alternating: redis, seed001, redis, seed001; each a run of its own with its JSON line.
    Matcher rounds = Pattern.compile("== round (\\d) of 2: --store (\\w+)").matcher(text);
    List<String> order = new java.util.ArrayList<>();
    while (rounds.find()) {
      order.add(rounds.group(1) + rounds.group(2));
    }
    assertThat(order).containsExactly("1redis", "1seed001", "2redis", "2seed001");
    Matcher each =
        Pattern.compile("\\{\"target\":\"(\\w+)\".*\"ops_per_s\":([0-9.]+),").matcher(text);
    java.util.Map<String, Double> summed = new java.util.HashMap<>();
    while (each.find()) {
      summed.merge(each.group(1), Double.parseDouble(each.group(2)), Double::sum);
    }
    assertThat(summed).containsOnlyKeys("redis", "seed001");
    String[] lines = text.strip().split("[\\r\\n]+");
    String json = lines[lines.length - 1];
    assertThat(json)
        .startsWith("{\"side_by_side\":{\"workload\":\"keys\",\"rounds\":2,")
        .contains("\"baseline\":\"seed001\"");
    Matcher ratio =
        Pattern.compile("\"store\":\"redis\".*?\"summed\":([0-9.]+),\"ratio\":([0-9.]+)")
            .matcher(json);
    assertThat(ratio.find()).as(json).isTrue();
    assertThat(Double.parseDouble(ratio.group(1))).isCloseTo(summed.get("redis"), within(0.2));
    assertThat(Double.parseDouble(ratio.group(2)))
        .isCloseTo(summed.get("redis") / summed.get("seed001"), within(0.001));
    assertThat(json).contains("\"store\":\"seed001\"").contains("\"ratio\":1.000}");
  }

  @Test
  void benchRoundsAgainstOneClusterUseNewKeysInEachRound(@TempDir Path dir) throws Exception {
    // The rounds share the cluster at --servers, and each run numbers its operations from 0: with
    // the same keys, the second round's acquires found the first round's completed keys.
    try (IdemServer server = startNode(dir)) {
      assertThat(
              run(
                  "bench",
                  "--workload",
                  "keys",
                  "--store",
                  "idem",
                  "--rounds",
                  "2",
                  "--servers",
                  servers,
                  "--sessions",
                  "2",
                  "--window",
                  "2",
                  "--warmup",
                  "1s",
                  "--duration",
                  "1s"))
          .as(err.toString())
          .isZero();
      String[] lines = outLines();
      assertThat(lines[lines.length - 1])
          .startsWith("{\"side_by_side\":{\"workload\":\"keys\",\"rounds\":2,")
          .contains("\"baseline\":\"idem\"");
      assertThat(out.toString()).contains("round 2:  idem ");
      // Each round's measured operations completed keys of their own (and the warm-ups more).
      Matcher ops =
          Pattern.compile("\\{\"target\":\"idem\".*\"ops\":(\\d+),").matcher(out.toString());
      long measured = 0;
      while (ops.find()) {
        measured += Long.parseLong(ops.group(1));
      }
      assertThat(measured).isPositive();
      assertThat(server.status().getKeyRecords()).isGreaterThanOrEqualTo(measured);
    }
  }

  @Test
  void benchKeysOnThePostgresStoreInStandardModeRunsMoreLanesThanTheStoreHasThreads() {
    assertThat(
            run(
                "bench",
                "--workload",
                "keys",
                "--store",
                "postgres",
                "--pg-mode",
                "standard",
                "--sessions",
                "2",
                "--window",
                "600",
                "--warmup",
                "1s",
                "--duration",
                "1s"))
        .as(err.toString())
        .isZero();
    assertThat(out.toString()).contains("pool 16, 1200 lanes").contains("checked: ");
  }

  /** {@code idem args} exits 2 with one line of error containing {@code error}. */
  private void assertRefused(String error, String... args) {
    err.getBuffer().setLength(0);
    assertThat(run(args)).as(err.toString()).isEqualTo(2);
    assertOneLineError(error);
  }

  @Test
  void benchSideBySideChecksEveryStoreBeforeItRunsAny() {
    assertRefused(
        "several stores, or --rounds, apply to --workload keys",
        "bench",
        "--store",
        "redis,seed001");
    assertRefused(
        "--store names a store twice", "bench", "--workload", "keys", "--store", "redis,redis");
    assertRefused(
        "--rounds 1-100", "bench", "--workload", "keys", "--store", "redis", "--rounds", "0");
    // postgres's bad setting is found before redis runs: nothing ran, nothing printed
    out.getBuffer().setLength(0);
    assertRefused(
        "--pg-pool 1-1024",
        "bench",
        "--workload",
        "keys",
        "--store",
        "redis,postgres",
        "--pg-pool",
        "0");
    assertThat(out.toString()).doesNotContain("== round");
  }

  @Test
  void benchOnPostgresChecksItsSettings() {
    String[] pg = {"bench", "--workload", "keys", "--store", "postgres"};
    assertRefused( // the put workload
        "--store postgres runs the keys workload on its own PostgreSQL only",
        "bench",
        "--store",
        "postgres");
    assertRefused("--ledger applies to --store idem, redis or seed001", with(pg, "--ledger"));
    assertRefused("--pg-pool 1-1024", with(pg, "--pg-pool", "0"));
    assertRefused(
        "at most 4096 lanes (--sessions x --window), got 6400",
        with(pg, "--sessions", "100", "--window", "64"));
    assertRefused(
        "--pg-settings: expected name=value, got 'fsync'", with(pg, "--pg-settings", "fsync"));
    assertRefused(
        "the bench keeps fsync, synchronous_commit, full_page_writes on",
        with(pg, "--pg-settings", "fsync=off"));
    assertRefused("--key-retention: at most 7 days", with(pg, "--key-retention", "200h"));
    err.getBuffer().setLength(0);
    assertThat(run(with(pg, "--pg-mode", "lazy"))).isEqualTo(2); // picocli's own message
    assertThat(err.toString()).contains("--pg-mode").contains("lazy");
    err.getBuffer().setLength(0);
    assertThat(
            run(with(pg, "--sessions", "1", "--window", "1", "--pg-settings", "no_such_setting=1")))
        .isEqualTo(1);
    assertOneLineError("cannot start PostgreSQL");
    assertThat(err.toString()).contains("no_such_setting"); // the server's own words
  }

  private static String[] with(String[] head, String... tail) {
    String[] all = java.util.Arrays.copyOf(head, head.length + tail.length);
    System.arraycopy(tail, 0, all, head.length, tail.length);
    return all;
  }

  @Test
  void benchOnRedisChecksItsSettings() {
    assertThat(run("bench", "--store", "redis")).isEqualTo(2); // the put workload
    assertOneLineError("--store redis runs the keys workload on its own redis-server only");
    err.getBuffer().setLength(0);
    assertThat(run("bench", "--workload", "keys", "--store", "seed001", "--local", "1"))
        .isEqualTo(2);
    err.getBuffer().setLength(0);
    assertThat(run("bench", "--workload", "keys", "--store", "redis", "--appendfsync", "sometimes"))
        .isEqualTo(2);
    assertOneLineError("always, everysec, no or off, got sometimes");
    err.getBuffer().setLength(0);
    assertThat(
            run(
                "bench",
                "--workload",
                "keys",
                "--store",
                "redis",
                "--redis-server",
                "/nonexistent/redis-server"))
        .isEqualTo(1);
    assertOneLineError("/nonexistent/redis-server");
  }

  @Test
  void verifyKeysKnowsItsStores() {
    assertThat(run("verify", "--workload", "keys", "--store", "mongo")).isEqualTo(2);
    assertOneLineError("no store named mongo");
    err.getBuffer().setLength(0);
    assertThat(run("verify", "--store", "redis")).isEqualTo(2);
    assertOneLineError("--store applies to --workload keys");
    err.getBuffer().setLength(0);
    assertThat(run("verify", "--workload", "keys", "--store", "redis", "--negative-control"))
        .isEqualTo(2);
    assertOneLineError("the negative control is the store seed001");
  }

  @Test
  void benchAgainstEtcdChecksItsSettingsAndSaysWhenNobodyAnswers() {
    assertThat(run("bench", "--target", "etcd", "--local", "1")).isEqualTo(2);
    assertOneLineError("--target etcd runs the put or get workload against --servers only");
    err.getBuffer().setLength(0);
    assertThat(run("bench", "--target", "etcd", "--workload", "incr")).isEqualTo(2);
    err.getBuffer().setLength(0);
    // Port 9 on loopback has no etcd: the probe put fails within its 5 s, in one line.
    assertThat(run("bench", "--target", "etcd", "--servers", "127.0.0.1:9", "--duration", "1s"))
        .isEqualTo(1);
    assertOneLineError("etcd did not answer a put");
  }

  @Test
  void verifyRefusesAnUnknownProfile() {
    assertThat(run("verify", "--profile", "quick")).isEqualTo(2);
    assertOneLineError("--profile must be ci or long");
    err.getBuffer().setLength(0);
    assertThat(run("verify", "--nodes", "4")).isEqualTo(2);
    assertOneLineError("--nodes must be 3 or 5, got 4");
  }

  @Test
  void failoverSettleMayBeZeroButNotNegative() {
    fails(2, "'-1s' must not be negative", "verify", "--failover", "kill", "--settle", "-1s");
    // 0s passes the option's conversion: the command then fails only at the unknown fault kind.
    fails(
        2,
        "--failover must be kill, stop or isolate, got melt",
        "verify",
        "--failover",
        "melt",
        "--settle",
        "0s");
  }

  @Test
  void verifyCheckOfADirectoryWithoutARunIsOneLine(@TempDir Path dir) {
    assertThat(run("verify", "--check", dir.toString())).isEqualTo(2);
    assertOneLineError("history.jsonl");
  }

  @Test
  void theLabHasEveryOperatorCommandAndItsOwn() {
    for (String[] cmd :
        new String[][] {
          {"--help"},
          {"kv", "put", "--help"},
          {"server", "--help"},
          {"demo", "--help"},
          {"demo", "payments", "--help"},
          {"bench", "--help"},
          {"verify", "--help"}
        }) {
      assertThat(run(cmd)).as(String.join(" ", cmd)).isZero();
    }
    assertThat(out.toString())
        .contains("Usage: idem")
        .contains("fault campaigns")
        .contains("--no-idempotency")
        .contains("--processing-delay");
  }
}
