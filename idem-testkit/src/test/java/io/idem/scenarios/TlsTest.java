package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import io.idem.client.NotSentException;
import io.idem.proto.Code;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.server.ServerConfig;
import io.idem.server.TlsFiles;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * TLS on real nodes: clients and peers over TLS with certificates from files, peers authenticating
 * each other, and client certificates when the node requires them. The test CA and certificates are
 * made here with openssl, in a temporary directory; none is committed.
 */
@Timeout(180)
class TlsTest {
  @TempDir static Path certs;
  @TempDir Path dir;

  @BeforeAll
  static void makeCertificates() throws Exception {
    TestCertificates.create(certs);
  }

  /** Runs openssl {@code args} with no input; its output. */
  private static String handshake(String... args) throws Exception {
    List<String> command = new ArrayList<>(List.of("openssl"));
    command.addAll(List.of(args));
    Path out = Files.createTempFile(certs, "s_client", ".out");
    Process p =
        new ProcessBuilder(command)
            .directory(certs.toFile())
            .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
            .redirectErrorStream(true)
            .redirectOutput(out.toFile())
            .start();
    try {
      assertThat(p.waitFor(30, TimeUnit.SECONDS)).as("openssl s_client finished").isTrue();
    } finally {
      p.destroyForcibly();
    }
    return Files.readString(out);
  }

  /** A node with the test TLS files, its members named, and access control off. */
  private static ServerConfig.Builder node(
      ServerConfig.Builder b, boolean requireClientCertificates) {
    return b.tls(nodeTls(requireClientCertificates))
        .peerSubjects(List.of(TestCertificates.NODE_SUBJECT))
        .authOff(true);
  }

  private static TlsFiles nodeTls(boolean requireClientCertificates) {
    return new TlsFiles(
        certs.resolve("node.pem"),
        certs.resolve("node.key"),
        certs.resolve("ca.pem"),
        requireClientCertificates);
  }

  private static IdemClient.Builder client(LocalCluster cluster) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .requestTimeout(Duration.ofSeconds(3));
  }

  @Test
  void peersAndClientsTalkOverTlsAndStrangersAreRefused() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir, b -> node(b, false))) {
      // A leader means the peers reached each other; their Raft port speaks TLS, CA-signed.
      cluster.waitForLeader(Duration.ofSeconds(60));
      String raft = cluster.node(0).config().self().raftAddress();
      assertThat(
              handshake(
                  "s_client",
                  "-connect",
                  raft,
                  "-CAfile",
                  "ca.pem",
                  "-cert",
                  "node.pem",
                  "-key",
                  "node.key",
                  "-verify_return_error"))
          .contains("Verify return code: 0 (ok)")
          .contains("CN = node");
      try (IdemClient c =
          client(cluster)
              .requestTimeout(Duration.ofSeconds(20))
              .tls(ClientTls.trusting(certs.resolve("ca.pem")))
              .build()) {
        c.put("k", "over tls");
        assertThat(c.get("k").orElseThrow().valueAsString()).isEqualTo("over tls");
      }
      try (IdemClient plain = client(cluster).build()) {
        assertThatThrownBy(() -> plain.put("k", "plain")).isInstanceOf(NotSentException.class);
      }
      try (IdemClient wrongCa =
          client(cluster).tls(ClientTls.trusting(certs.resolve("other-ca.pem"))).build()) {
        assertThatThrownBy(() -> wrongCa.put("k", "x")).isInstanceOf(NotSentException.class);
      }
    }
  }

  @Test
  void aNodeThatRequiresClientCertificatesAcceptsOnlyTheCasOwn() {
    try (LocalCluster cluster = LocalCluster.start(1, dir, b -> node(b, true))) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      Path ca = certs.resolve("ca.pem");
      try (IdemClient withCert =
          client(cluster)
              .requestTimeout(Duration.ofSeconds(20))
              .tls(new ClientTls(ca, certs.resolve("client.pem"), certs.resolve("client.key")))
              .build()) {
        assertThat(withCert.increment("n", 1)).isEqualTo(1);
      }
      try (IdemClient without = client(cluster).tls(ClientTls.trusting(ca)).build()) {
        assertThatThrownBy(() -> without.increment("n", 1)).isInstanceOf(NotSentException.class);
      }
      try (IdemClient stranger =
          client(cluster)
              .tls(new ClientTls(ca, certs.resolve("stranger.pem"), certs.resolve("stranger.key")))
              .build()) {
        assertThatThrownBy(() -> stranger.increment("n", 1)).isInstanceOf(NotSentException.class);
      }
    }
  }

  @Test
  void aSessionBelongsToTheCertificateThatOpenedIt() {
    try (LocalCluster cluster = LocalCluster.start(1, dir, b -> node(b, true))) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      String address = cluster.clientAddresses().get(0);
      Path ca = certs.resolve("ca.pem");
      try (RawSession owner =
              new RawSession(
                  address, ca, certs.resolve("client.pem"), certs.resolve("client.key"));
          RawSession other =
              new RawSession(
                  address, ca, certs.resolve("tenant-b.pem"), certs.resolve("tenant-b.key"))) {
        RegisterReply grant =
            owner.register(
                RegisterRequest.newBuilder()
                    .setName("orders")
                    .setTtlMs(60_000)
                    .setNonce(1)
                    .build());
        assertThat(grant.getCode()).isEqualTo(Code.OK);
        owner.open(grant);
        owner.send(1, 1, Operation.newBuilder().setPut(Put.newBuilder().setKey("k")).build());
        assertThat(owner.answerTo(1).getResult().getCode()).isEqualTo(Code.OK);

        // Another tenant that learnt the secret can neither resume (and so fence) the session,
        // whose
        // name is only its registrar's (names are per principal: the other has no "orders")...
        RegisterReply stolen =
            other.register(
                RegisterRequest.newBuilder()
                    .setName("orders")
                    .setTtlMs(60_000)
                    .setNonce(2)
                    .setResume(true)
                    .setSecretHi(grant.getSecretHi())
                    .setSecretLo(grant.getSecretLo())
                    .build());
        assertThat(stolen.getCode()).isEqualTo(Code.SESSION_EXPIRED);
        // ... nor open a stream of it.
        other.open(grant);
        ServerFrame refused = other.next();
        assertThat(refused.getResult().getCode()).isEqualTo(Code.UNAUTHENTICATED);
        assertThat(refused.getResult().getMessage()).contains("another client certificate");

        // The owner's certificate resumes it (a new epoch), with its saved answers.
        RegisterReply resumed =
            owner.register(
                RegisterRequest.newBuilder()
                    .setName("orders")
                    .setTtlMs(60_000)
                    .setNonce(3)
                    .setResume(true)
                    .setSecretHi(grant.getSecretHi())
                    .setSecretLo(grant.getSecretLo())
                    .build());
        assertThat(resumed.getCode()).isEqualTo(Code.OK);
        assertThat(resumed.getClientId()).isEqualTo(grant.getClientId());
        assertThat(resumed.getEpoch()).isEqualTo(1);
      }
    }
  }

  @Test
  void badTlsSettingsAreClearErrors() {
    assertThatThrownBy(() -> ClientTls.trusting(certs.resolve("missing.pem")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("missing.pem");
    assertThatThrownBy(
            () -> new ClientTls(certs.resolve("ca.pem"), certs.resolve("client.pem"), null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("come together");
    assertThatThrownBy(
            () ->
                IdemClient.builder()
                    .servers("127.0.0.1:1")
                    .tls(ClientTls.trusting(certs.resolve("client.key")))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cannot use the TLS files");
  }
}
