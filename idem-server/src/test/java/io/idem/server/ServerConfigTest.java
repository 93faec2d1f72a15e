package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.server.RaftServerConfigKeys;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ServerConfigTest {
  private static final List<ServerConfig.Peer> PEERS =
      List.of(
          ServerConfig.Peer.parse("n1=127.0.0.1:7002:7001"),
          ServerConfig.Peer.parse("n2=127.0.0.1:7012:7011"));

  @Test
  void clientEndpointBindsTheAdvertisedAddressUnlessToldOtherwise() {
    ServerConfig plain = ServerConfig.builder().id("n2").peers(PEERS).build();
    assertThat(plain.clientListenAddress()).isEqualTo("127.0.0.1:7011");
    ServerConfig proxied =
        ServerConfig.builder().id("n2").peers(PEERS).clientListen("127.0.0.1:9011").build();
    assertThat(proxied.clientListenAddress()).isEqualTo("127.0.0.1:9011");
    assertThat(proxied.self().clientAddress())
        .as("what clients are told")
        .isEqualTo("127.0.0.1:7011");
  }

  @Test
  void ratisKeepsRepliesOnlyBrieflyBecauseIdemNeverRetriesACallId() {
    // A retry cache of Ratis's default 60 s held a minute of every entry's outcomes on the leader.
    RaftProperties p = RaftNode.properties(ServerConfig.builder().id("n1").peers(PEERS).build());
    assertThat(RaftServerConfigKeys.RetryCache.expiryTime(p).toLong(TimeUnit.MILLISECONDS))
        .isEqualTo(1_000);
  }

  @Test
  void badListenAddressIsRefusedByName() {
    assertThatThrownBy(() -> ServerConfig.builder().clientListen("localhost").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("client listen address must be host:port, got \"localhost\"");
  }

  @Test
  void connectionLimitsOutOfRangeAreRefusedByFlag() {
    assertThat(new ConnectionLimits(0, 0, 0, 0, 0)).isEqualTo(ConnectionLimits.NONE);
    assertThatThrownBy(() -> new ConnectionLimits(-1, 0, 0, 0, 0))
        .hasMessage("--max-connections-per-client must be 0 (no bound) or positive, got -1");
    assertThatThrownBy(() -> new ConnectionLimits(0, -1, 0, 0, 0))
        .hasMessageContaining("--max-calls-per-connection");
    assertThatThrownBy(() -> new ConnectionLimits(0, 0, 999, 0, 0))
        .as("grpc-java would quietly make it a second")
        .hasMessage("--max-connection-idle-ms must be 0 (no bound) or at least 1000, got 999");
    assertThatThrownBy(() -> new ConnectionLimits(0, 0, 0, 999, 0))
        .hasMessageContaining("--max-connection-age-ms");
    assertThatThrownBy(() -> new ConnectionLimits(0, 0, 0, 1000, -1))
        .hasMessageContaining("--max-connection-age-grace-ms");
  }

  @Test
  void streamBoundsBelowTheirFloorsAreRefusedByName() {
    assertThatThrownBy(() -> ServerConfig.builder().streamMaxOwedAnswers(65535).build())
        .hasMessageContaining("streamMaxOwedAnswers must be at least 65536");
    assertThatThrownBy(() -> ServerConfig.builder().streamMaxOwedBytes((1 << 20) - 1).build())
        .hasMessageContaining("streamMaxOwedBytes must be at least 1048576");
    assertThatThrownBy(() -> ServerConfig.builder().streamStallTimeoutMs(0).build())
        .hasMessageContaining("streamStallTimeoutMs must be positive");
  }

  @Test
  void underTlsTheRaftPortMustTellPeersFromClients(@TempDir Path dir) throws Exception {
    Path cert = Files.writeString(dir.resolve("node.pem"), "cert");
    Path key = Files.writeString(dir.resolve("node.key"), "key");
    Path ca = Files.writeString(dir.resolve("ca.pem"), "client and peer CA");
    Path caCopy = Files.writeString(dir.resolve("ca-copy.pem"), "client and peer CA");
    Path peerCa = Files.writeString(dir.resolve("peer-ca.pem"), "peer CA");
    TlsFiles tls = new TlsFiles(cert, key, ca, true);
    assertThatThrownBy(() -> ServerConfig.builder().authOff(true).tls(tls).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("must tell the cluster's members from clients");
    assertThatThrownBy(
            () ->
                ServerConfig.builder()
                    .tls(tls)
                    .peerTls(new TlsFiles(cert, key, caCopy, true))
                    .build())
        .as("the same CA in another file")
        .hasMessageContaining("must tell the cluster's members from clients");
    assertThat(
            ServerConfig.builder()
                .authOff(true)
                .tls(tls)
                .peerTls(new TlsFiles(cert, key, peerCa, true))
                .build()
                .raftTls()
                .trustedCertificates())
        .isEqualTo(peerCa);
    assertThat(
            ServerConfig.builder()
                .authOff(true)
                .tls(tls)
                .peerSubjects(List.of("CN=n1, O=Idem"))
                .build()
                .raftTls())
        .isEqualTo(tls);
    assertThatThrownBy(
            () -> ServerConfig.builder().authOff(true).tls(tls).peerSubjects(List.of("n1")).build())
        .hasMessageContaining("peer certificate subject \"n1\" is not an X.500 name");
    assertThatThrownBy(() -> ServerConfig.builder().peerSubjects(List.of("CN=n1")).build())
        .hasMessageContaining("need the node's TLS files too");
  }

  @Test
  void withTlsAuthIsOnUnlessAskedOffAndWithoutItThereIsNoAdmin(@TempDir Path dir) throws Exception {
    Path cert = Files.writeString(dir.resolve("node.pem"), "cert");
    Path key = Files.writeString(dir.resolve("node.key"), "key");
    Path ca = Files.writeString(dir.resolve("ca.pem"), "ca");
    TlsFiles tls = new TlsFiles(cert, key, ca, true);
    List<String> peers = List.of("CN=node");
    assertThatThrownBy(() -> ServerConfig.builder().tls(tls).peerSubjects(peers).build())
        .hasMessageContaining("--auth-admin")
        .hasMessageContaining("--no-auth");
    assertThat(
            ServerConfig.builder()
                .tls(tls)
                .peerSubjects(peers)
                .authAdmin("CN=admin")
                .build()
                .authAdmin())
        .isEqualTo("CN=admin");
    assertThatThrownBy(
            () -> ServerConfig.builder().tls(tls).peerSubjects(peers).authAdmin("admin").build())
        .hasMessageContaining("not an X.500 name");
    assertThatThrownBy(() -> ServerConfig.builder().authAdmin("CN=admin").build())
        .hasMessageContaining("--auth-admin needs TLS");
  }

  @Test
  void theRaftPortServesRaftOnlyAndUnderAnAllowlistOnlyTheNamedPeers() {
    PeerGate open = new PeerGate(List.of());
    assertThat(open.refusal(PeerGate.RAFT_SERVICE, null)).isNull();
    assertThat(open.refusal("ratis.grpc.RaftClientProtocolService", null))
        .contains("serves the cluster's members only");
    assertThat(open.refusal("ratis.grpc.AdminProtocolService", null))
        .contains("serves the cluster's members only");
    PeerGate named = new PeerGate(List.of("CN=node"));
    assertThat(named.refusal(PeerGate.RAFT_SERVICE, null))
        .isEqualTo("the Raft port needs a peer certificate");
  }

  @Test
  void theBootstrapsQuotasBudgetAndBoundsAreHeldToTheRangesOfTheFormatItWrites() {
    assertThatThrownBy(
            () ->
                ServerConfig.builder()
                    .bootstrapQuotas(io.idem.proto.Quotas.newBuilder().setLeases(-1).build())
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("quotas.leases must be in [1, 1000000]");
    assertThatThrownBy(() -> ServerConfig.builder().bootstrapBackendBytes(1024).build())
        .hasMessageContaining("backend_bytes must be in [1048576");
    assertThatThrownBy(
            () ->
                ServerConfig.builder()
                    .sessions(io.idem.core.SessionTableConfig.builder().window(2048).build())
                    .build())
        .hasMessageContaining("window must be in [1, 1024]");
    ServerConfig ok =
        ServerConfig.builder()
            .bootstrapQuotas(io.idem.proto.Quotas.newBuilder().setKeyRecords(5).build())
            .bootstrapBackendBytes(8L << 20)
            .build();
    assertThat(ok.bootstrapQuotas().getKeyRecords()).isEqualTo(5);
    assertThat(ok.bootstrapBackendBytes()).isEqualTo(8L << 20);
  }
}
