package io.idem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
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
  void benchRefusesOutOfRangeSettingsAndUnreachableServers() {
    assertThat(run("bench", "--sessions", "0")).isEqualTo(2);
    assertThat(run("bench", "--workload", "delete")).isEqualTo(2);
    assertThat(run("bench", "--servers", "127.0.0.1:9", "--duration", "1s")).isEqualTo(1);
    assertThat(err.toString()).contains("idem:").doesNotContain("\tat ");
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
  void leaseIsRenewedAndRevokedOnlyWithTheHoldersIdentity(@TempDir Path dir) throws Exception {
    try (IdemServer server = startNode(dir)) {
      String id = dir.resolve("me.id").toString();
      assertThat(
              run("lease", "grant", "lock", "30s", "--servers", servers, "--identity", id)
                  + run("lease", "keepalive", "lock", "--servers", servers, "--identity", id))
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
    assertOneLineError("no leader took the change within");
  }

  private static long revision(String shown) {
    return shown
        .lines()
        .filter(l -> l.startsWith("revision "))
        .map(l -> Long.parseLong(l.split(" ")[1]))
        .findFirst()
        .orElseThrow();
  }

  @Test
  void everyCommandHasHelp() {
    for (String[] cmd :
        new String[][] {
          {"--help"},
          {"kv", "--help"},
          {"kv", "put", "--help"},
          {"lease", "grant", "--help"},
          {"status", "--help"},
          {"config", "--help"},
          {"config", "show", "--help"},
          {"config", "set", "--help"},
          {"demo", "--help"},
          {"bench", "--help"},
          {"verify", "--help"},
          {"server", "--help"}
        }) {
      assertThat(run(cmd)).as(String.join(" ", cmd)).isZero();
    }
    assertThat(out.toString()).contains("Usage: idem").contains("--servers").contains("--peers");
  }
}
