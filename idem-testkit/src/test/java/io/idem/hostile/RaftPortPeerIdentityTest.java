package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import io.idem.proto.LogEntry;
import io.idem.server.ServerConfig;
import io.idem.server.TlsFiles;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.TestCertificates;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Under mutual TLS, a tenant holds a client certificate from the cluster's CA. It must not pass for
 * a peer on the Raft port: neither for Ratis's client service (closed to everyone) nor for Raft's
 * own protocol (votes, appends), which only the named members, or the holders of the peer CA's
 * certificates, may speak.
 */
@Timeout(180)
class RaftPortPeerIdentityTest {
  @TempDir static Path certsDir;
  @TempDir Path dir;
  static TestCertificates certs;

  @BeforeAll
  static void makeCertificates() throws Exception {
    certs = TestCertificates.create(certsDir);
  }

  private static Path[] tenant() {
    return new Path[] {certs.certificate("client"), certs.key("client"), certs.certificate("ca")};
  }

  private static TlsFiles nodeTls() {
    return new TlsFiles(
        certs.certificate("node"), certs.key("node"), certs.certificate("ca"), true);
  }

  @Test
  void withOneCaATenantCertificateCannotSpeakRaftNorProposeEntries() throws Exception {
    try (LocalCluster cluster =
        LocalCluster.start(
            3,
            dir,
            b ->
                b.tls(nodeTls())
                    .peerSubjects(List.of(TestCertificates.NODE_SUBJECT))
                    .authAdmin("CN=client"))) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(60));
      List<ServerConfig.Peer> peers = cluster.node(0).config().peers();
      String raft = peers.get(leader).raftAddress();

      assertThatThrownBy(() -> RaftPortClient.requestVote(raft, tenant()))
          .hasStackTraceContaining("PERMISSION_DENIED")
          .hasStackTraceContaining("CN=client is not one of the cluster's peers");
      try (RaftPortClient a = new RaftPortClient(peers, peers.get(leader).id(), tenant())) {
        assertThatThrownBy(
                () ->
                    a.propose(
                        LogEntry.newBuilder()
                            .setFormatVersion(5)
                            .setLeaderTimeMs(System.currentTimeMillis())
                            .build()))
            .hasStackTraceContaining("PERMISSION_DENIED");
      }
      // The members themselves still speak Raft: writes commit.
      try (IdemClient c = client(cluster)) {
        c.put("k", "v");
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }

  @Test
  void withAPeerCaATenantCertificateFailsTheRaftPortsHandshake() throws Exception {
    TlsFiles peerTls =
        new TlsFiles(
            certs.certificate("peer"), certs.key("peer"), certs.certificate("peer-ca"), true);
    try (LocalCluster cluster =
        LocalCluster.start(3, dir, b -> b.tls(nodeTls()).peerTls(peerTls).authAdmin("CN=client"))) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(60));
      String raft = cluster.node(0).config().peers().get(leader).raftAddress();
      // The tenant trusts the peer CA, so only the server's check of its certificate can fail.
      Path[] tenantTrustingPeers = {
        certs.certificate("client"), certs.key("client"), certs.certificate("peer-ca")
      };
      assertThatThrownBy(() -> RaftPortClient.requestVote(raft, tenantTrustingPeers))
          .hasStackTraceContaining("UNAVAILABLE");
      try (IdemClient c = client(cluster)) {
        c.put("k", "over a cluster whose peers have their own CA");
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }

  @Test
  void tlsWithOneCaAndNoPeerSubjectsIsRefusedAtStart() {
    assertThatThrownBy(() -> ServerConfig.builder().tls(nodeTls()).authAdmin("CN=client").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("--peer-allow")
        .hasMessageContaining("--peer-tls-ca");
  }

  private static IdemClient client(LocalCluster cluster) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .requestTimeout(Duration.ofSeconds(20))
        .tls(
            new ClientTls(
                certs.certificate("ca"), certs.certificate("client"), certs.key("client")))
        .build();
  }
}
