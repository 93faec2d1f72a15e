package io.idem.server;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A node's TLS material, PEM files: its certificate chain and private key (PKCS#8), and the CA
 * certificates it trusts. Clients reach it over TLS; its peers too, with mutual TLS between them
 * (each presents its certificate and checks the other's against the CA). Whether clients must
 * present a certificate signed by the CA is {@code requireClientCertificates}.
 *
 * @param certificateChain the node's certificate chain (PEM)
 * @param privateKey the node's private key (PEM, PKCS#8, unencrypted)
 * @param trustedCertificates the CA certificates trusted for peers and clients (PEM)
 * @param requireClientCertificates whether a client must present a certificate the CA signed
 */
public record TlsFiles(
    Path certificateChain,
    Path privateKey,
    Path trustedCertificates,
    boolean requireClientCertificates) {

  /**
   * Checks that every file is there and readable.
   *
   * @throws IllegalArgumentException naming the first file that is not
   */
  public TlsFiles {
    readable("TLS certificate chain", certificateChain);
    readable("TLS private key", privateKey);
    readable("TLS trusted certificates", trustedCertificates);
  }

  private static void readable(String what, Path file) {
    if (file == null) {
      throw new IllegalArgumentException(what + " is required for TLS");
    }
    if (!Files.isRegularFile(file) || !Files.isReadable(file)) {
      throw new IllegalArgumentException(what + " " + file + " is not a readable file");
    }
  }
}
