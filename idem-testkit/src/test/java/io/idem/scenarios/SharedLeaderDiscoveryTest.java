package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.IdemTransport;
import io.idem.testkit.LocalCluster;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Sessions on one transport share where the leader is: the first finds it, the next ones start
 * there instead of asking the listed servers in turn.
 */
@Timeout(120)
class SharedLeaderDiscoveryTest {
  @TempDir Path dir;

  @Test
  void aSecondSessionOnTheTransportStartsAtTheLeaderTheFirstFound() throws Exception {
    String nobody;
    try (ServerSocket s = new ServerSocket(0)) {
      nobody = "127.0.0.1:" + s.getLocalPort(); // closed again: nothing listens there
    }
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      // The dead address is listed first: a session that starts from the list tries it first.
      List<String> servers = List.of(nobody, cluster.clientAddress(0));
      try (IdemTransport shared = IdemTransport.create();
          IdemTransport other = IdemTransport.create();
          IdemClient first = IdemClient.builder().servers(servers).transport(shared).build()) {
        first.put("a", "1");
        assertThat(first.retries()).as("the first session tried the dead address").isPositive();
        try (IdemClient second = IdemClient.builder().servers(servers).transport(shared).build();
            IdemClient alone = IdemClient.builder().servers(servers).transport(other).build()) {
          second.put("b", "2");
          alone.put("c", "3");
          assertThat(second.retries()).as("started at the leader the first found").isZero();
          assertThat(alone.retries()).as("another transport knows nothing").isPositive();
        }
      }
    }
  }
}
