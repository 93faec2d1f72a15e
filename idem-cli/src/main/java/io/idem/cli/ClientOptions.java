package io.idem.cli;

import io.idem.client.IdemClient;
import java.time.Duration;
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

  IdemClient client() {
    return IdemClient.builder()
        .servers(servers)
        .requestTimeout(timeout)
        .stallTimeout(timeout)
        .sessionTtl(Duration.ofSeconds(30))
        .build();
  }
}
