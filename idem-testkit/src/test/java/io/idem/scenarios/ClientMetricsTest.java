package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.IdemClient;
import io.idem.client.NotSentException;
import io.idem.client.WrongTypeException;
import io.idem.testkit.LocalCluster;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The client's meters on the user's registry, after known calls to a real node. */
@Timeout(120)
class ClientMetricsTest {
  @TempDir Path dir;

  private static double requests(SimpleMeterRegistry r, String op, String outcome) {
    var timer =
        r.find("idem.client.requests")
            .tags("client", "orders", "op", op, "outcome", outcome)
            .timer();
    return timer == null ? 0 : timer.count();
  }

  @Test
  void callsAreTimedByOperationAndOutcome() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      try (IdemClient c =
          IdemClient.builder()
              .servers(cluster.clientAddresses())
              .meterRegistry(registry, "orders")
              .build()) {
        c.put("a", "1");
        c.put("b", "2");
        c.put("c", "3");
        c.append("list", "x".getBytes(java.nio.charset.StandardCharsets.UTF_8));
        assertThatThrownBy(() -> c.increment("list", 1)).isInstanceOf(WrongTypeException.class);
        IdemClient view = c.withTimeout(Duration.ofSeconds(10));
        view.put("d", "4");
      }
    }
    assertThat(requests(registry, "put", "ok")).isEqualTo(4);
    assertThat(requests(registry, "append", "ok")).isEqualTo(1);
    assertThat(requests(registry, "increment", "rejected")).isEqualTo(1);
    assertThat(requests(registry, "increment", "ok")).isZero();
    assertThat(registry.get("idem.client.in.flight").tag("client", "orders").gauge().value())
        .isZero();
    assertThat(
            registry.get("idem.client.retries").tag("client", "orders").functionCounter().count())
        .isGreaterThanOrEqualTo(0);
  }

  @Test
  void aCallThatCouldNotBeSentIsCountedAsNotSent() throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort(); // closed again: nothing listens there
    }
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (IdemClient c =
        IdemClient.builder()
            .servers("127.0.0.1:" + port)
            .requestTimeout(Duration.ofSeconds(2))
            .meterRegistry(registry, "orders")
            .build()) {
      assertThatThrownBy(() -> c.put("a", "1")).isInstanceOf(NotSentException.class);
    }
    assertThat(requests(registry, "put", "not_sent")).isEqualTo(1);
    assertThat(
            registry.get("idem.client.retries").tag("client", "orders").functionCounter().count())
        .isPositive();
  }
}
