package io.idem.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
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
    java.time.Clock clock =
        java.time.Clock.fixed(
            java.time.Instant.parse("2026-03-04T05:06:07.250Z"), java.time.ZoneOffset.UTC);
    long in30s = clock.millis() + 30_000;
    assertThat(LeaseCommand.expiry(in30s, clock))
        .isEqualTo(
            "expires at 2026-03-04T05:06:37.250Z, in about 30.0 s (log time " + in30s + " ms)");
    long past = clock.millis() - 1_500;
    assertThat(LeaseCommand.expiry(past, clock))
        .isEqualTo(
            "expires at 2026-03-04T05:06:05.750Z, in about -1.5 s (log time " + past + " ms)");
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
          {"server", "--help"}
        }) {
      assertThat(run(cmd)).as(String.join(" ", cmd)).isZero();
    }
    assertThat(out.toString())
        .contains("Usage: idem")
        .contains("--servers")
        .contains("--peers")
        .contains("--fingerprint=TEXT")
        .contains("--effect-increment=KEY=DELTA");
  }

  @Test
  void theDistributionsCommandHasNoLabCommands() {
    for (String lab : new String[] {"demo", "bench", "verify"}) {
      err.getBuffer().setLength(0);
      assertThat(run(lab, "--help")).as(lab).isEqualTo(2);
      assertOneLineError("unknown command or argument '" + lab + "'");
    }
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
