package io.idem.cli;

import io.idem.client.ClientTls;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * How a command secures its connections to the cluster: TLS, optionally with a client certificate.
 * Public for the lab's commands, which reach a cluster the same way.
 */
public final class TlsOptions {
  @Option(
      names = "--tls-ca",
      defaultValue = "${env:IDEM_TLS_CA:-}",
      description =
          "PEM CA certificates that signed the servers': connect over TLS. Default: plaintext.")
  String tlsCa;

  @Option(
      names = "--tls-cert",
      defaultValue = "${env:IDEM_CLIENT_TLS_CERT:-}",
      description = "PEM client certificate chain, for servers that require one (with --tls-key).")
  String tlsCert;

  @Option(
      names = "--tls-key",
      defaultValue = "${env:IDEM_CLIENT_TLS_KEY:-}",
      description = "PEM private key (PKCS#8) of --tls-cert.")
  String tlsKey;

  /** The TLS settings given, or null for plaintext. */
  public ClientTls tls() {
    if (tlsCa.isEmpty()) {
      if (!tlsCert.isEmpty() || !tlsKey.isEmpty()) {
        throw new IllegalArgumentException("--tls-cert and --tls-key need --tls-ca");
      }
      return null;
    }
    return new ClientTls(
        Path.of(tlsCa),
        tlsCert.isEmpty() ? null : Path.of(tlsCert),
        tlsKey.isEmpty() ? null : Path.of(tlsKey));
  }
}
