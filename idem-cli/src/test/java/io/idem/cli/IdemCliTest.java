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

  @Test
  void leaseIsRenewedAndRevokedOnlyWithTheHoldersIdentity(@TempDir Path dir) throws Exception {
    int port;
    try (java.net.ServerSocket s =
        new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    int raft;
    try (java.net.ServerSocket s =
        new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      raft = s.getLocalPort();
    }
    String servers = "127.0.0.1:" + port;
    try (IdemServer server =
        IdemServer.start(
            ServerConfig.builder()
                .dataDir(dir.resolve("data"))
                .peers(List.of(new ServerConfig.Peer("n1", "127.0.0.1:" + raft, servers)))
                .build())) {
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
  void everyCommandHasHelp() {
    for (String[] cmd :
        new String[][] {
          {"--help"},
          {"kv", "--help"},
          {"kv", "put", "--help"},
          {"lease", "grant", "--help"},
          {"status", "--help"},
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
