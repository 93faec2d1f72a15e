package io.idem.cli;

import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import java.nio.file.Path;
import java.time.Duration;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** How a command reaches the cluster. */
final class ClientOptions {
  @Option(
      names = "--servers",
      defaultValue = "${env:IDEM_SERVERS:-127.0.0.1:7001}",
      description = "Client addresses of the cluster, comma-separated. Default: ${DEFAULT-VALUE}.")
  String servers;

  @Option(
      names = "--timeout",
      defaultValue = "5s",
      converter = DurationConverter.class,
      description = "How long to wait for an answer, e.g. 5s, 500ms. Default: ${DEFAULT-VALUE}.")
  Duration timeout;

  @Option(
      names = "--identity",
      description =
          "A file keeping this client's session across invocations (created if absent), so that"
              + " one command renews or revokes a lease another granted: only the session that was"
              + " granted a lease may. Without it each invocation is a new session.")
  Path identity;

  @Option(
      names = "--session-ttl",
      defaultValue = "30s",
      converter = DurationConverter.class,
      description =
          "How long the session outlives this command (with --identity, the time to the next"
              + " command). Default: ${DEFAULT-VALUE}.")
  Duration sessionTtl;

  @Mixin TlsOptions tlsOptions = new TlsOptions();

  /** The TLS settings given, or null for plaintext. */
  ClientTls tls() {
    return tlsOptions.tls();
  }

  IdemClient client() {
    IdemClient.Builder b =
        IdemClient.builder()
            .servers(servers)
            .requestTimeout(timeout)
            .stallTimeout(timeout)
            .sessionTtl(sessionTtl)
            .tls(tls());
    if (identity != null) {
      b.identity(identity, "idem-cli");
    }
    return b.build();
  }
}
