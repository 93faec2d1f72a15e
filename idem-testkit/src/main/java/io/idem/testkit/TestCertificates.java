package io.idem.testkit;

import io.idem.server.ServerConfig;
import io.idem.server.TlsFiles;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * A throw-away PKI for TLS tests, made with the {@code openssl} command in a directory of the
 * test's own (nothing is committed). Three CAs ({@code ca}, {@code other-ca}, {@code peer-ca});
 * signed by {@code ca}: {@code node} (valid for 127.0.0.1 and localhost), and the client
 * certificates {@code client}, {@code tenant-a}, {@code tenant-b}, {@code greedy} and {@code admin}
 * (subjects {@code CN=client}, {@code CN=tenant-a}, ...); signed by {@code other-ca}: {@code
 * stranger}; signed by {@code peer-ca}, the CA of the Raft port only: {@code peer} ({@code
 * CN=peer}). Each name {@code x} has {@code x.pem} (certificate) and {@code x.key} (PKCS#8 key).
 *
 * <p>A node whose client port and Raft port share {@code ca} must name its peers' subjects ({@link
 * #NODE_SUBJECT}); one whose Raft port uses {@code peer} and {@code peer-ca} need not.
 */
public final class TestCertificates {
  /** The subject of the {@code node} certificate, which every test node presents to its peers. */
  public static final String NODE_SUBJECT = "CN=node";

  private final Path dir;

  private TestCertificates(Path dir) {
    this.dir = dir;
  }

  /**
   * Makes every certificate in {@code dir}.
   *
   * @throws IOException if openssl is missing or fails (its output is in {@code openssl.log})
   */
  public static TestCertificates create(Path dir) throws IOException, InterruptedException {
    TestCertificates c = new TestCertificates(dir);
    for (String ca : List.of("ca", "other-ca", "peer-ca")) {
      c.openssl(
          "req",
          "-x509",
          "-newkey",
          "rsa:2048",
          "-nodes",
          "-keyout",
          ca + ".key",
          "-out",
          ca + ".pem",
          "-days",
          "2",
          "-subj",
          "/CN=idem test " + ca);
    }
    Files.writeString(dir.resolve("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
    for (String who : List.of("node", "client", "tenant-a", "tenant-b", "greedy", "admin")) {
      c.sign(who, "ca");
    }
    c.sign("stranger", "other-ca");
    c.sign("peer", "peer-ca");
    return c;
  }

  /** The certificate of {@code name} (PEM). */
  public Path certificate(String name) {
    return dir.resolve(name + ".pem");
  }

  /** The private key of {@code name} (PEM, PKCS#8). */
  public Path key(String name) {
    return dir.resolve(name + ".key");
  }

  /**
   * A node's TLS as the tests run it: the {@code node} certificate for clients and peers, signed by
   * {@code ca}, client certificates required, the members named by {@link #NODE_SUBJECT}, and
   * access control on with {@code authAdmin} as the first admin.
   */
  public UnaryOperator<ServerConfig.Builder> securedNode(String authAdmin) {
    TlsFiles tls = new TlsFiles(certificate("node"), key("node"), certificate("ca"), true);
    return b -> b.tls(tls).peerSubjects(List.of(NODE_SUBJECT)).authAdmin(authAdmin);
  }

  /** The directory holding the files. */
  public Path dir() {
    return dir;
  }

  private void sign(String who, String ca) throws IOException, InterruptedException {
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        who + ".key",
        "-out",
        who + ".csr",
        "-subj",
        "/CN=" + who);
    openssl(
        "x509",
        "-req",
        "-in",
        who + ".csr",
        "-CA",
        ca + ".pem",
        "-CAkey",
        ca + ".key",
        "-CAcreateserial",
        "-out",
        who + ".pem",
        "-days",
        "2",
        "-extfile",
        "san.ext");
  }

  private void openssl(String... args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of("openssl"));
    command.addAll(List.of(args));
    File log = dir.resolve("openssl.log").toFile();
    Process p =
        new ProcessBuilder(command)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log))
            .start();
    try {
      if (!p.waitFor(60, TimeUnit.SECONDS)) {
        throw new IOException("openssl " + String.join(" ", args) + " took over 60 s");
      }
      if (p.exitValue() != 0) {
        throw new IOException(
            "openssl "
                + String.join(" ", args)
                + " failed (exit "
                + p.exitValue()
                + "): "
                + Files.readString(log.toPath()));
      }
    } finally {
      p.destroyForcibly();
    }
  }

  /** The client TLS files of {@code who}'s certificate, trusting the CA {@code ca}. */
  public io.idem.client.ClientTls clientTls(String who) {
    return new io.idem.client.ClientTls(certificate("ca"), certificate(who), key(who));
  }

  /** A raw client of {@code address} with {@code who}'s certificate. */
  public RawSession rawSession(String address, String who) {
    return rawSession(address, -1, who);
  }

  /**
   * A raw client of {@code address} with {@code who}'s certificate whose calls name {@code group}.
   */
  public RawSession rawSession(String address, int group, String who) {
    return new RawSession(address, group, certificate("ca"), certificate(who), key(who));
  }
}
