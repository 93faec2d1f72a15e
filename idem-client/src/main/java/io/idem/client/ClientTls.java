package io.idem.client;

import java.nio.file.Files;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/**
 * TLS for the client's connections, PEM files: the CA certificates that signed the servers', and,
 * for servers that require client certificates, the client's own chain and key (PKCS#8,
 * unencrypted). Server certificates must name the address the client dials (a DNS name, or an IP
 * address in the subject alternative names).
 *
 * @param trustedCertificates the CA certificates to trust (PEM)
 * @param certificateChain the client's certificate chain (PEM); null: none presented
 * @param privateKey its private key (PEM, PKCS#8); null exactly when {@code certificateChain} is
 */
public record ClientTls(
    Path trustedCertificates, @Nullable Path certificateChain, @Nullable Path privateKey) {

  /**
   * Checks that the files are there and readable, and that the chain and key come together.
   *
   * @throws IllegalArgumentException naming the first bad part
   */
  public ClientTls {
    readable("TLS trusted certificates", trustedCertificates);
    if ((certificateChain == null) != (privateKey == null)) {
      throw new IllegalArgumentException(
          "a client certificate chain and its private key come together, got only one");
    }
    if (certificateChain != null) {
      readable("TLS certificate chain", certificateChain);
      readable("TLS private key", privateKey);
    }
  }

  /** Trusts {@code trustedCertificates}, presents no client certificate. */
  public static ClientTls trusting(Path trustedCertificates) {
    return new ClientTls(trustedCertificates, null, null);
  }

  private static void readable(String what, Path file) {
    if (file == null) {
      throw new IllegalArgumentException(what + " is required");
    }
    if (!Files.isRegularFile(file) || !Files.isReadable(file)) {
      throw new IllegalArgumentException(what + " " + file + " is not a readable file");
    }
  }
}
