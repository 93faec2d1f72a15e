package io.idem.cli;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.server.ServerConfig;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code idem server}'s settings from flags, the environment and a configuration file. */
class ServerCommandConfigTest {
  @TempDir Path dir;

  /** The configuration {@code args} and {@code env} describe, parsed as {@code idem server}. */
  private static ServerConfig parse(Map<String, String> env, String... args) {
    ServerCommand command = new ServerCommand();
    command.environment = env;
    new CommandLine(command).parseArgs(args);
    return command.config();
  }

  private Path file(String text) throws Exception {
    Path file = dir.resolve("idem.conf");
    Files.writeString(file, text, UTF_8);
    return file;
  }

  @Test
  void aFlagWinsOverTheEnvironmentWhichWinsOverTheFile() throws Exception {
    Path file =
        file(
            """
            # three layers
            tick-ms = 100
            snapshot-every = 200
            entries-in-flight = 3
            quota = kv_keys=1000,leases=7
            peers = a=127.0.0.1:9002:9001,b=127.0.0.1:9012:9011
            id = b
            """);
    ServerConfig c =
        parse(
            Map.of("IDEM_SNAPSHOT_EVERY", "300", "IDEM_ENTRIES_IN_FLIGHT", "4"),
            "--config",
            file.toString(),
            "--entries-in-flight",
            "5");
    assertThat(c.tickIntervalMs()).as("from the file").isEqualTo(100);
    assertThat(c.snapshotEveryEntries()).as("the environment over the file").isEqualTo(300);
    assertThat(c.maxInFlightBatches()).as("the flag over both").isEqualTo(5);
    assertThat(c.electionTimeoutMinMs()).as("the built-in default").isEqualTo(300);
    assertThat(c.id()).isEqualTo("b");
    assertThat(c.peers()).extracting(ServerConfig.Peer::id).containsExactly("a", "b");
    assertThat(c.bootstrapQuotas().getKvKeys()).isEqualTo(1000);
    assertThat(c.bootstrapQuotas().getLeases()).isEqualTo(7);
  }

  @Test
  void theEnvironmentNamesTheFileWhenNoFlagDoes() throws Exception {
    Path file = file("tick-ms = 123\njoin = false\n");
    assertThat(parse(Map.of("IDEM_CONFIG", file.toString())).tickIntervalMs()).isEqualTo(123);
    assertThat(parse(Map.of()).tickIntervalMs()).as("no file").isEqualTo(500);
  }

  @Test
  void everyFlagHasAKeyAndAVariable() {
    CommandLine cli = new CommandLine(new ServerCommand());
    assertThat(ServerDefaults.keys(cli.getCommandSpec()))
        .contains("data-dir", "peers", "tls-require-client-cert", "quota", "no-auth")
        .doesNotContain("config", "help", "version")
        .hasSize(cli.getCommandSpec().options().size() - 3);
    assertThat(ServerDefaults.variable("max-connection-age-grace-ms"))
        .isEqualTo("IDEM_MAX_CONNECTION_AGE_GRACE_MS");
  }

  @Test
  void anUnknownKeyInTheFileIsAnErrorNamingKeyAndFile() throws Exception {
    Path file = file("tick-ms = 100\nsnapshot-evry = 5\n");
    assertThatThrownBy(() -> parse(Map.of(), "--config", file.toString()))
        .isInstanceOf(CommandLine.ParameterException.class)
        .hasMessageContaining(file.toString())
        .hasMessageContaining("unknown key 'snapshot-evry'")
        .hasMessageContaining("did you mean 'snapshot-every'?");
  }

  @Test
  void anUnknownKeyFailsTheCommandBeforeAnyNodeStarts() throws Exception {
    Path file = file("unsafe-local-reads = true\n");
    StringWriter err = new StringWriter();
    int code =
        Idem.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(err))
            .execute("server", "--config", file.toString(), "--data-dir", dir.toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString()).contains(file + ": unknown key 'unsafe-local-reads'");
  }

  @Test
  void aMissingFileIsAnErrorNamingIt() {
    Path missing = dir.resolve("absent.conf");
    StringWriter err = new StringWriter();
    int code =
        Idem.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(err))
            .execute("server", "--config", missing.toString());
    assertThat(code).isEqualTo(2);
    assertThat(err.toString().strip())
        .isEqualTo("idem: the configuration file " + missing + " does not exist (see --help)");
  }

  @Test
  void aBadValueNamesKeyValueAndFile() throws Exception {
    Path file = file("tick-ms = soon\n");
    assertThatThrownBy(() -> parse(Map.of(), "--config", file.toString()))
        .hasMessageContaining(file + ": tick-ms: bad value 'soon' (not a whole number)");
    Path flags = file("join = maybe\n");
    assertThatThrownBy(() -> parse(Map.of(), "--config", flags.toString()))
        .hasMessageContaining(flags + ": join: bad value 'maybe' (not true or false)");
    assertThatThrownBy(() -> parse(Map.of("IDEM_ENTRIES_IN_FLIGHT", "9999999999")))
        .hasMessageContaining("IDEM_ENTRIES_IN_FLIGHT: bad value '9999999999' (out of range)");
  }

  @Test
  void aFlagGivenOnTheCommandLineIsNotCheckedAgainstTheFile() throws Exception {
    Path file = file("tick-ms = soon\n");
    assertThat(parse(Map.of(), "--config", file.toString(), "--tick-ms", "50").tickIntervalMs())
        .isEqualTo(50);
  }
}
