package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.conf.RaftProperties;
import org.apache.ratis.server.RaftServerConfigKeys;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

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
  void flagsReachTheConfiguration() {
    Main main = new Main();
    new CommandLine(main)
        .parseArgs(
            "--id=n1",
            "--peers=n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011",
            "--client-listen=127.0.0.1:9001",
            "--log-segment-bytes=65536");
    ServerConfig c = main.config();
    assertThat(c.clientListenAddress()).isEqualTo("127.0.0.1:9001");
    assertThat(c.logSegmentBytes()).isEqualTo(65536);
    assertThat(c.peers()).hasSize(2);
  }
}
