package com.example.payments;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.testkit.LocalCluster;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

/** The application against a real one-node Idem cluster from idem-testkit, over real HTTP. */
@Timeout(120)
class PaymentsApplicationTest {
  private final HttpClient http = HttpClient.newHttpClient();

  @Test
  void aRetriedWithdrawalIsPaidOnceAndAnsweredTheSame(@TempDir Path dir) throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      try (ConfigurableApplicationContext app =
          SpringApplication.run(
              PaymentsApplication.class,
              "--server.port=0",
              "--server.address=127.0.0.1",
              "--idem.keys.servers=" + String.join(",", cluster.clientAddresses()))) {
        URI base =
            URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
        HttpResponse<String> first = withdraw(base, "\"k-1\"", 30);
        HttpResponse<String> retry = withdraw(base, "\"k-1\"", 30);
        assertThat(first.statusCode()).isEqualTo(201);
        assertThat(first.body()).contains("\"balance\":70");
        assertThat(retry.statusCode()).isEqualTo(201);
        assertThat(retry.body()).isEqualTo(first.body());
        assertThat(
                http.send(
                        HttpRequest.newBuilder(base.resolve("/accounts/alice")).build(),
                        HttpResponse.BodyHandlers.ofString())
                    .body())
            .contains("\"balance\":70");
        assertThat(withdraw(base, null, 30).statusCode()).as("no key").isEqualTo(400);
      }
    }
  }

  private HttpResponse<String> withdraw(URI base, String key, int amount) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(base.resolve("/accounts/alice/withdrawals"))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":" + amount + "}"));
    if (key != null) {
      b.header("Idempotency-Key", key);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }
}
