package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.IdemTransport;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Clients that share one transport keep sessions of their own: closing one leaves the others
 * working, and closing the transport ends the rest with a clear error instead of a hang.
 */
@Timeout(120)
class SharedTransportTest {
  @TempDir Path dir;

  @Test
  void clientsOnOneTransportHaveTheirOwnSessionsAndOutliveEachOther() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      String servers = String.join(",", cluster.clientAddresses());
      IdemTransport transport = IdemTransport.create();
      List<IdemClient> clients = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        clients.add(IdemClient.builder().servers(servers).transport(transport).window(4).build());
      }
      List<CompletableFuture<Long>> increments = new ArrayList<>();
      for (IdemClient c : clients) {
        for (int i = 0; i < 50; i++) {
          increments.add(c.incrementAsync("shared", 1));
        }
      }
      CompletableFuture.allOf(increments.toArray(CompletableFuture[]::new)).join();
      assertThat(increments.stream().map(CompletableFuture::join).distinct().count())
          .isEqualTo(400);
      assertThat(clients.stream().mapToLong(IdemClient::clientId).distinct().count()).isEqualTo(8);

      clients.get(0).close();
      assertThat(clients.get(1).increment("shared", 1)).isEqualTo(401);

      transport.close();
      IdemClient orphan = clients.get(2);
      assertThatThrownBy(() -> orphan.increment("shared", 1))
          .isInstanceOf(IdemException.class)
          .hasMessageContaining("transport");
      for (IdemClient c : clients) {
        c.close();
      }
    }
  }
}
