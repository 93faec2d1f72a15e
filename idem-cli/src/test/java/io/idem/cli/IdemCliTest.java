package io.idem.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The command line's error paths: one line on stderr, a non-zero exit, never a stack trace. */
@Timeout(60)
class IdemCliTest {
  private final StringWriter out = new StringWriter();
  private final StringWriter err = new StringWriter();

  /** The client address of the node {@link #startNode} started. */
  private String servers;

  private int run(String... args) {
    return Idem.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(args);
  }

  private void assertOneLineError(String contains) {
    String e = err.toString().strip();
    assertThat(e).contains(contains);
    assertThat(e.lines().count()).as("error lines: %s", e).isEqualTo(1);
    assertThat(e).doesNotContain("\tat ").doesNotContain("Exception:");
  }

  @Test
  void unknownFlagIsOneLineAndExitTwo() {
    assertThat(run("kv", "get", "k", "--bogus")).isEqualTo(2);
    assertOneLineError("Unknown option: '--bogus'");
  }

  @Test
  void aLeaseExpiryReadsAsATimeAndADuration() {
    long in30s = System.currentTimeMillis() + 30_000;
    assertThat(LeaseCommand.expiry(in30s))
        .matches(
            "expires at 20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z, in about (29|30)\\.[0-9] s"
                + " \\(log time "
                + in30s
                + " ms\\)");
  }

  @Test
  void unknownCommandFailsEvenWithHelp() {
    assertThat(run("nosuchcommand", "--help")).isEqualTo(2);
    assertOneLineError("unknown command or argument 'nosuchcommand'");
    assertThat(out.toString()).isEmpty();
  }

  @Test
  void unknownCommandWithoutHelpFailsToo() {
    assertThat(run("nosuchcommand")).isEqualTo(2);
    assertOneLineError("nosuchcommand");
  }

  @Test
  void missingArgumentIsOneLineAndExitTwo() {
    assertThat(run("kv", "put", "only-a-key")).isEqualTo(2);
    assertOneLineError("Missing required parameter");
  }

  @Test
  void badDurationIsOneLineAndExitTwo() {
    assertThat(run("kv", "get", "k", "--timeout", "soon")).isEqualTo(2);
    assertOneLineError("not a duration");
  }

  @Test
  void unreachableServerIsOneLineAndExitOne() {
    // Port 9 (discard) on loopback has no Idem server: the call times out or is refused.
    assertThat(run("kv", "incr", "n", "--servers", "127.0.0.1:9", "--timeout", "1s")).isEqualTo(1);
    assertOneLineError("idem:");
  }

  @Test
  void badServerAddressIsOneLineAndExitOne() {
    assertThat(run("kv", "get", "k", "--servers", "nohostport")).isEqualTo(1);
    assertOneLineError("host:port");
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
    // Nobody listens there: the first write gives up after --timeout (15 s by default).
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
    String[] lines = out.toString().strip().split("[\\r\\n]+");
    String json = lines[lines.length - 1];
    assertThat(json).startsWith("{").contains("\"workload\":\"keys\"").contains("\"errors\":0}");
    Matcher ops = Pattern.compile("\"ops\":(\\d+),").matcher(json);
    assertThat(ops.find()).as(json).isTrue();
    long total = Long.parseLong(ops.group(1));
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
      String[] lines = out.toString().strip().split("[\\r\\n]+");
      assertThat(lines[0])
          .startsWith(store + " on a private redis-server")
          .contains("appendfsync always");
      String json = lines[lines.length - 1];
      assertThat(json)
          .startsWith("{\"target\":\"" + store + "\"")
          .contains("\"workload\":\"keys\"")
          .contains("\"errors\":0}");
      Matcher ops = Pattern.compile("\"ops\":(\\d+),").matcher(json);
      assertThat(ops.find()).as(json).isTrue();
      assertThat(Long.parseLong(ops.group(1))).isPositive();
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
      String[] lines = out.toString().strip().split("[\\r\\n]+");
      assertThat(lines[0])
          .startsWith("postgres (" + mode + " mode) on a private PostgreSQL")
          .contains("fsync=on")
          .contains("pool 4, 8 lanes");
      String json = lines[lines.length - 2];
      assertThat(json)
          .startsWith("{\"target\":\"postgres\"")
          .contains("\"workload\":\"keys\"")
          .contains("\"errors\":0}");
      Matcher ops = Pattern.compile("\"ops\":(\\d+),").matcher(json);
      assertThat(ops.find()).as(json).isTrue();
      assertThat(Long.parseLong(ops.group(1))).isPositive();
      // Every acknowledged operation (warm-up included) left one completed key, and one payment
      // in the transactional mode only.
      Matcher checked =
          Pattern.compile("^checked: (\\d+) acknowledged, (\\d+) completed keys, (\\d+) payments$")
              .matcher(lines[lines.length - 1]);
      assertThat(checked.find()).as(lines[lines.length - 1]).isTrue();
      long acknowledged = Long.parseLong(checked.group(1));
      assertThat(acknowledged).isGreaterThanOrEqualTo(Long.parseLong(ops.group(1)));
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
      String[] lines = out.toString().strip().split("[\\r\\n]+");
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
    assertOneLineError("--target etcd runs the put workload against --servers only");
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
  void memberCommandsRefuseBadInputAndChangeNothing(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      assertThat(
              run(
                  "member",
                  "add",
                  "--id",
                  "n2",
                  "--raft-address",
                  "nohostport",
                  "--client-address",
                  "127.0.0.1:1",
                  "--servers",
                  servers))
          .isEqualTo(2);
      assertOneLineError("--raft-address must be host:port, got \"nohostport\"");
      err.getBuffer().setLength(0);
      assertThat(
              run(
                  "member",
                  "replace",
                  "--old",
                  "n1",
                  "--id",
                  "n1",
                  "--raft-address",
                  "127.0.0.1:1",
                  "--client-address",
                  "127.0.0.1:2",
                  "--servers",
                  servers))
          .isEqualTo(2);
      assertOneLineError("the new member needs a new id, not n1");
      err.getBuffer().setLength(0);
      assertThat(run("member", "remove", "--id", "n9", "--servers", servers)).isEqualTo(1);
      assertOneLineError("refused, nothing changed: no member n9 to remove (members: n1)");
      err.getBuffer().setLength(0);
      assertThat(run("member", "remove", "--id", "n1", "--servers", servers)).isEqualTo(1);
      assertOneLineError("the change would leave no member");
      err.getBuffer().setLength(0);
      assertThat(
              run(
                  "member",
                  "add",
                  "--id",
                  "n1",
                  "--raft-address",
                  "127.0.0.1:1",
                  "--client-address",
                  "127.0.0.1:2",
                  "--servers",
                  servers))
          .isEqualTo(1);
      assertOneLineError("n1 is already a member: a new member needs a new id");
      assertThat(server.status().getMembersList())
          .extracting(m -> m.getId() + " " + m.getVoter())
          .containsExactly("n1 true");
      assertThat(run("member", "list", "--servers", servers)).as(err.toString()).isEqualTo(0);
      assertThat(out.toString())
          .containsPattern(
              "n1 +127\\.0\\.0\\.1:[0-9]+ +" + Pattern.quote(servers) + " +LEADER +voter");
    }
  }

  @Test
  void leaseIsRenewedAndRevokedOnlyWithTheHoldersIdentity(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      String id = dir.resolve("me.id").toString();
      assertThat(
              run("lease", "grant", "lock", "30s", "--servers", servers, "--identity", id)
                  + run("lease", "keepalive", "lock", "--servers", servers, "--identity", id))
          .as(err.toString())
          .isZero();
      assertThat(server.status().getLeases()).isEqualTo(1);
      assertThat(run("lease", "keepalive", "lock", "--servers", servers)).isEqualTo(1);
      assertOneLineError("held by another session");
      assertThat(run("lease", "revoke", "lock", "--servers", servers, "--identity", id)).isZero();
      assertThat(server.status().getLeases()).isZero();
    }
  }

  @Test
  void configShowPrintsTheDefaultsAndSetChangesWhatKvAccepts(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      assertThat(run("config", "show", "--servers", servers)).as(err.toString()).isZero();
      assertThat(out.toString())
          .contains("max-value-bytes 1048576\n")
          .contains("max-key-bytes 4096\n")
          .contains("window 128\n")
          .contains("max-lease-ttl 1440m\n")
          .contains("revision ");
      out.getBuffer().setLength(0);

      assertThat(run("config", "set", "--max-value-bytes", "2000", "--servers", servers))
          .as(err.toString())
          .isZero();
      assertThat(out.toString()).contains("max-value-bytes 2000\n").contains("window 128\n");
      long revision = revision(out.toString());
      assertThat(revision).isPositive();
      assertThat(server.status().getLimits().getMaxValueBytes()).isEqualTo(2000);

      assertThat(run("kv", "put", "big", "x".repeat(2001), "--servers", servers)).isEqualTo(1);
      assertOneLineError("the limit is 2000");
      err.getBuffer().setLength(0);
      assertThat(run("kv", "put", "big", "x".repeat(2000), "--servers", servers))
          .as(err.toString())
          .isZero();

      out.getBuffer().setLength(0);
      assertThat(run("config", "show", "--servers", servers)).isZero();
      assertThat(out.toString()).contains("max-value-bytes 2000\n");
      assertThat(revision(out.toString())).isEqualTo(revision);
    }
  }

  @Test
  void configSetOutOfRangeIsRefusedByTheServerInOneLine(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      assertThat(run("config", "set", "--max-value-bytes", "-1", "--servers", servers))
          .isEqualTo(1);
      assertOneLineError("INVALID_ARGUMENT: max_value_bytes must be in [1, 2097152], got -1");
      err.getBuffer().setLength(0);
      assertThat(run("config", "set", "--window", "70000", "--servers", servers)).isEqualTo(1);
      assertOneLineError("window must be in [1, 65536], got 70000");
      err.getBuffer().setLength(0);
      // 0 on the wire means "keep": the command line refuses it rather than change nothing.
      assertThat(run("config", "set", "--window", "0", "--servers", servers)).isEqualTo(2);
      assertOneLineError("0 is not a setting");
      assertThat(server.status().getSessions().getWindow()).isEqualTo(128);
      assertThat(server.status().getLimits().getMaxValueBytes()).isEqualTo(1 << 20);
    }
  }

  @Test
  void configSetWithoutASettingIsAUsageError() {
    assertThat(run("config", "set", "--servers", "127.0.0.1:9")).isEqualTo(2);
    assertOneLineError("config set needs at least one of --max-key-bytes");
  }

  @Test
  void configSetAcceptsSizesWithUnitsAndRefusesOthers() {
    assertThat(new SizeConverter().convert("2MiB")).isEqualTo(2 << 20);
    assertThat(new SizeConverter().convert("4KiB")).isEqualTo(4096);
    assertThat(new SizeConverter().convert("-1")).isEqualTo(-1);
    assertThat(run("config", "set", "--max-value-bytes", "2GB")).isEqualTo(2);
    assertOneLineError("not a size like 2000, 64KiB or 2MiB");
  }

  @Test
  void configAgainstNoServerIsOneLineAndExitOne() {
    assertThat(run("config", "show", "--servers", "127.0.0.1:9", "--timeout", "1s")).isEqualTo(1);
    assertOneLineError("no server reachable");
    err.getBuffer().setLength(0);
    assertThat(
            run("config", "set", "--window", "64", "--servers", "127.0.0.1:9", "--timeout", "1s"))
        .isEqualTo(1);
    assertOneLineError("no leader answered within");
  }

  private static long revision(String shown) {
    return shown
        .lines()
        .filter(l -> l.startsWith("revision "))
        .map(l -> Long.parseLong(l.split(" ")[1]))
        .findFirst()
        .orElseThrow();
  }

  /** Runs a command that must succeed; its output, stripped. */
  private String ok(String... args) {
    out.getBuffer().setLength(0);
    err.getBuffer().setLength(0);
    assertThat(run(args)).as("%s: %s", String.join(" ", args), err).isZero();
    return out.toString().strip();
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

  private static long field(String line, String name) {
    Matcher m = Pattern.compile("\\b" + name + "=(\\d+)").matcher(line);
    assertThat(m.find()).as("%s in %s", name, line).isTrue();
    return Long.parseLong(m.group(1));
  }

  @Test
  void durationsTakeHours() {
    assertThat(new DurationConverter().convert("24h")).isEqualTo(Duration.ofHours(24));
    assertThat(new DurationConverter().convert("250ms")).isEqualTo(Duration.ofMillis(250));
    fails(2, "'0h' must be positive", "key", "acquire", "k", "--retention", "0h");
  }

  @Test
  void keyIsAcquiredRenewedCompletedWithAnEffectAndReplayed(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      String s = "--servers=" + servers;
      String acquired =
          ok("key", "acquire", "order-1", "--scope", "shop", "--fingerprint", "req", s);
      assertThat(acquired).matches("acquired token=\\d+ deadline=\\d+ takeover=false");
      long token = field(acquired, "token");
      long deadline = field(acquired, "deadline");
      String args = "--scope=shop";

      // Another caller (a new session) with the same request sees the owner's deadline.
      assertThat(ok("key", "acquire", "order-1", args, "--fingerprint", "req", s))
          .isEqualTo("in-progress deadline=" + deadline);
      fails(
          1,
          "idem: mismatch: the key was acquired with another fingerprint",
          "key",
          "acquire",
          "order-1",
          args,
          "--fingerprint",
          "other",
          s);
      // Without --scope it is another key altogether.
      assertThat(ok("key", "acquire", "order-1", s)).startsWith("acquired token=");

      String fp =
          HexFormat.of()
              .formatHex(MessageDigest.getInstance("SHA-256").digest("req".getBytes(UTF_8)), 0, 8);
      String shown = ok("key", "show", "order-1", args, s);
      assertThat(shown)
          .startsWith("in-progress token=" + token + " deadline=" + deadline + " completed-at=0 ")
          .endsWith(" fingerprint=" + fp + " response=");

      String renewed =
          ok("key", "renew", "order-1", args, "--token", "" + token, "--extension", "1m", s);
      assertThat(renewed).matches("settled deadline=\\d+");
      assertThat(field(renewed, "deadline")).isGreaterThan(deadline);

      fails(
          1,
          "idem: fenced: the key's current token is " + token,
          "key",
          "complete",
          "order-1",
          args,
          "--token",
          "" + (token + 1),
          s);
      assertThat(
              ok(
                  "key",
                  "complete",
                  "order-1",
                  args,
                  "--token",
                  "" + token,
                  "--response",
                  "invoice 7",
                  "--effect-increment",
                  "invoices=7",
                  s))
          .isEqualTo("settled number=7");
      assertThat(ok("kv", "get", "invoices", s)).isEqualTo("7");
      assertThat(server.status().getKeys()).as("kv keys: the effect's counter only").isEqualTo(1);

      assertThat(ok("key", "acquire", "order-1", args, "--fingerprint", "req", s))
          .isEqualTo("completed response=invoice 7");
      shown = ok("key", "show", "order-1", args, s);
      assertThat(shown)
          .startsWith("completed token=" + token + " ")
          .endsWith(" response=invoice 7");
      assertThat(field(shown, "completed-at")).isPositive();
      assertThat(field(shown, "expires-at")).isGreaterThan(field(shown, "completed-at"));
      fails(
          1,
          "idem: fenced: the key has no owner",
          "key",
          "complete",
          "order-1",
          args,
          "--token",
          "" + token,
          s);
    }
  }

  @Test
  void releasedKeyIsGoneAndCanBeAcquiredAgain(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      String s = "--servers=" + servers;
      long token = field(ok("key", "acquire", "job", s), "token");
      // show prints times in log time, the cluster's clock: not past the server's now.
      long logTime = field(ok("key", "show", "job", s), "log-time");
      assertThat(logTime).isPositive().isLessThanOrEqualTo(server.status().getLogTimeMs());
      assertThat(ok("key", "release", "job", "--token", "" + token, s)).isEqualTo("settled");
      out.getBuffer().setLength(0);
      assertThat(run("key", "show", "job", s)).isEqualTo(3);
      assertThat(out.toString()).isEqualTo("(not found)\n");
      fails(
          1,
          "idem: fenced: the key has no owner",
          "key",
          "release",
          "job",
          "--token",
          "" + token,
          s);
      assertThat(field(ok("key", "acquire", "job", s), "token")).isGreaterThan(token);
    }
  }

  @Test
  void keyCommandsRefuseBadInputBeforeConnecting() {
    // Port 9 has no server: a command that got as far as connecting would exit 1, not 2.
    String s = "--servers=127.0.0.1:9";
    fails(2, "KEY must not be empty", "key", "acquire", "", s);
    fails(2, "KEY must have at most 255 characters, got 256", "key", "show", "k".repeat(256), s);
    fails(2, "--scope must have at most 255", "key", "acquire", "k", "--scope", "s".repeat(256), s);
    fails(2, "a token is positive, got -1", "key", "complete", "k", "--token", "-1", s);
    fails(2, "a token is positive, got 0", "key", "release", "k", "--token", "0", s);
    fails(2, "Missing required option: '--token=N'", "key", "renew", "k", s);
    fails(2, "not a duration", "key", "acquire", "k", "--in-progress", "soon", s);
    fails(
        2, "'-5s' must be positive", "key", "renew", "k", "--token", "1", "--extension", "-5s", s);
    fails(
        2,
        "mutually exclusive",
        "key",
        "complete",
        "k",
        "--token",
        "1",
        "--effect-put",
        "a=b",
        "--effect-append",
        "c=d",
        s);
    fails(
        2,
        "--effect-increment 'n=x' is not KEY=DELTA",
        "key",
        "complete",
        "k",
        "--token",
        "1",
        "--effect-increment",
        "n=x",
        s);
    fails(
        2,
        "--effect-put 'ab' is not KEY=VALUE",
        "key",
        "complete",
        "k",
        "--token",
        "1",
        "--effect-put",
        "ab",
        s);
    fails(
        2,
        "--effect-append needs a KEY",
        "key",
        "complete",
        "k",
        "--token",
        "1",
        "--effect-append",
        "=v",
        s);
    fails(2, "'job' is not KEY:TOKEN", "kv", "put", "a", "b", "--fence", "job", s);
    fails(2, "a token is positive, got 0", "kv", "incr", "a", "--fence", "job:0", s);
    fails(2, "the fence KEY must not be empty", "kv", "delete", "a", "--fence", ":5", s);
    fails(2, "--fence-scope needs --fence", "kv", "append", "a", "b", "--fence-scope", "x", s);
  }

  @Test
  void fencedWriteIsRefusedOnceTheKeyIsTakenOver(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      String s = "--servers=" + servers;
      String scope = "--fence-scope=tenant:a";
      long first =
          field(ok("key", "acquire", "job:7", "--scope=tenant:a", "--in-progress=2s", s), "token");
      assertThat(ok("kv", "put", "report", "v1", "--fence", "job:7:" + first, scope, s))
          .startsWith("OK revision=");

      // The owner's 2 s pass in log time: poll, boundedly, until another acquire takes it over.
      String taken = "";
      long giveUp = System.nanoTime() + Duration.ofSeconds(20).toNanos();
      while (!taken.contains("takeover=true") && System.nanoTime() < giveUp) {
        Thread.sleep(100);
        taken = ok("key", "acquire", "job:7", "--scope=tenant:a", s);
      }
      assertThat(taken).startsWith("acquired token=").endsWith("takeover=true");
      long second = field(taken, "token");
      assertThat(second).isGreaterThan(first);

      fails(
          1,
          "idem: fenced write refused: key \"job:7\" has token "
              + second
              + "; the write's fence token "
              + first
              + " is stale",
          "kv",
          "put",
          "report",
          "v2",
          "--fence",
          "job:7:" + first,
          scope,
          s);
      fails(
          1,
          "idem: fenced write refused:",
          "kv",
          "incr",
          "n",
          "--fence",
          "job:7:" + first,
          scope,
          s);
      fails(
          1,
          "idem: fenced write refused:",
          "kv",
          "delete",
          "report",
          "--fence",
          "job:7:" + first,
          scope,
          s);
      assertThat(ok("kv", "get", "report", s)).isEqualTo("v1");
      assertThat(server.status().getKeys()).as("kv keys: the refused incr made none").isEqualTo(1);
      // The same key in another scope is another key: no record, so the fence refuses too.
      fails(1, "has no record", "kv", "put", "report", "v2", "--fence", "job:7:" + second, s);
      assertThat(ok("kv", "put", "report", "v3", "--fence", "job:7:" + second, scope, s))
          .startsWith("OK revision=");
      assertThat(ok("kv", "get", "report", s)).isEqualTo("v3");
    }
  }

  @Test
  void everyCommandHasHelp() {
    for (String[] cmd :
        new String[][] {
          {"--help"},
          {"kv", "--help"},
          {"kv", "put", "--help"},
          {"lease", "grant", "--help"},
          {"key", "--help"},
          {"key", "acquire", "--help"},
          {"key", "complete", "--help"},
          {"key", "release", "--help"},
          {"key", "renew", "--help"},
          {"key", "show", "--help"},
          {"status", "--help"},
          {"config", "--help"},
          {"config", "show", "--help"},
          {"config", "set", "--help"},
          {"demo", "--help"},
          {"demo", "payments", "--help"},
          {"bench", "--help"},
          {"verify", "--help"},
          {"server", "--help"}
        }) {
      assertThat(run(cmd)).as(String.join(" ", cmd)).isZero();
    }
    assertThat(out.toString())
        .contains("Usage: idem")
        .contains("--servers")
        .contains("--peers")
        .contains("--fingerprint=TEXT")
        .contains("--effect-increment=KEY=DELTA")
        .contains("--no-idempotency")
        .contains("--processing-delay");
  }

  @Test
  void kvWritesDocumentTheirFence() {
    for (String cmd : new String[] {"put", "delete", "incr", "append", "cas"}) {
      out.getBuffer().setLength(0);
      assertThat(run("kv", cmd, "--help")).as(cmd).isZero();
      assertThat(out.toString()).as(cmd).contains("--fence=KEY:TOKEN").contains("--fence-scope");
    }
  }
}
