package io.idem.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.server.ConnectionLimits;
import io.idem.server.ServerConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code idem server}'s flags reach the node's configuration, and default as documented. */
class ServerCommandFlagsTest {
  @Test
  void flagsReachTheConfiguration() {
    ServerCommand main = new ServerCommand();
    new CommandLine(main)
        .parseArgs(
            "--id=n1",
            "--peers=n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011",
            "--client-listen=127.0.0.1:9001",
            "--log-segment-bytes=65536");
    ServerConfig c = main.config();
    assertThat(c.clientListenAddress()).isEqualTo("127.0.0.1:9001");
    assertThat(c.logSegmentBytes()).isEqualTo(65536);
    assertThat(c.peers()).hasSize(2);
  }

  @Test
  void connectionLimitFlagsReachTheConfigurationAndDefaultAsDocumented() {
    ServerCommand defaults = new ServerCommand();
    new CommandLine(defaults).parseArgs();
    assertThat(defaults.config().connectionLimits()).isEqualTo(ConnectionLimits.DEFAULTS);
    assertThat(ServerConfig.builder().build().connectionLimits())
        .isEqualTo(ConnectionLimits.DEFAULTS);
    ServerCommand main = new ServerCommand();
    new CommandLine(main)
        .parseArgs(
            "--max-connections-per-client=3",
            "--max-calls-per-connection=7",
            "--max-connection-idle-ms=1000",
            "--max-connection-age-ms=60000",
            "--max-connection-age-grace-ms=0");
    assertThat(main.config().connectionLimits())
        .isEqualTo(new ConnectionLimits(3, 7, 1000, 60_000, 0));
  }

  @Test
  void queueAndStreamBoundFlagsReachTheConfigurationAndDefaultToTheConstants() {
    ServerCommand defaults = new ServerCommand();
    new CommandLine(defaults).parseArgs();
    ServerConfig d = defaults.config();
    assertThat(d.maxQueuedCommands()).isEqualTo(ServerConfig.DEFAULT_MAX_QUEUED_COMMANDS);
    assertThat(d.maxQueuedBytes()).isEqualTo(ServerConfig.DEFAULT_MAX_QUEUED_BYTES);
    assertThat(d.streamMaxOwedAnswers()).isEqualTo(ServerConfig.DEFAULT_STREAM_MAX_OWED_ANSWERS);
    assertThat(d.streamMaxOwedBytes()).isEqualTo(ServerConfig.DEFAULT_STREAM_MAX_OWED_BYTES);
    assertThat(d.streamStallTimeoutMs()).isEqualTo(ServerConfig.DEFAULT_STREAM_STALL_TIMEOUT_MS);
    ServerCommand main = new ServerCommand();
    new CommandLine(main)
        .parseArgs(
            "--max-queued-commands=7",
            "--max-queued-bytes=4096",
            "--stream-max-owed-answers=65536",
            "--stream-max-owed-bytes=1048576",
            "--stream-stall-timeout-ms=1");
    assertThat(main.config().streamMaxOwedAnswers()).isEqualTo(65536);
    assertThat(main.config().streamMaxOwedBytes()).isEqualTo(1 << 20);
    assertThat(main.config().streamStallTimeoutMs()).isEqualTo(1);
    assertThat(main.config().maxQueuedCommands()).isEqualTo(7);
    assertThat(main.config().maxQueuedBytes()).isEqualTo(4096);
  }

  @Test
  void peerFlagsReachTheConfiguration(@TempDir Path dir) throws Exception {
    for (String f : List.of("node.pem", "node.key", "ca.pem")) {
      Files.writeString(dir.resolve(f), f);
    }
    ServerCommand main = new ServerCommand();
    new CommandLine(main)
        .parseArgs(
            "--tls-cert=" + dir.resolve("node.pem"),
            "--tls-key=" + dir.resolve("node.key"),
            "--tls-ca=" + dir.resolve("ca.pem"),
            "--peer-allow=CN=n1,O=Idem;CN=n2,O=Idem",
            "--peer-allow=CN=n3,O=Idem",
            "--auth-admin=CN=admin, O=Idem");
    assertThat(main.config().peerSubjects())
        .containsExactly("CN=n1,O=Idem", "CN=n2,O=Idem", "CN=n3,O=Idem");
    assertThat(main.config().authAdmin()).isEqualTo("CN=admin, O=Idem");
  }
}
