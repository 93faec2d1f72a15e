package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.keys.spi.KeyStore;
import io.idem.spring.app.PaymentsApplication;
import io.idem.testkit.stores.PostgresServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The starter on the PostgreSQL store: a real Spring Boot application whose DataSource points at a
 * private PostgreSQL server gets {@link PostgresKeyStore} from {@code idem.keys.postgres.enabled},
 * migrates its schema, and replays a retried POST without running it again; its problems' types are
 * pages the filter serves at the configured {@code idem.keys.problem-types.path}.
 */
@Timeout(180)
class PostgresStoreStarterTest {
  static PostgresServer server;

  /** The application's own DataSource, as a service has one. */
  @Configuration(proxyBeanMethods = false)
  static class ApplicationDataSource {
    @Bean(destroyMethod = "close")
    DataSource dataSource() {
      return server.pool(8, 10_000);
    }
  }

  @Test
  void theStarterMakesThePostgresStoreOverTheApplicationsDataSource() throws Exception {
    try (PostgresServer pg = PostgresServer.startFast()) {
      server = pg;
      try (ConfigurableApplicationContext app =
          new SpringApplication(PaymentsApplication.class, ApplicationDataSource.class)
              .run(
                  "--server.port=0",
                  "--server.address=127.0.0.1",
                  "--idem.keys.postgres.enabled=true",
                  "--idem.keys.scope-header=X-Tenant",
                  "--idem.keys.problem-types.path=/docs/errors/",
                  "--logging.level.io.idem=WARN",
                  "--spring.main.banner-mode=off")) {
        assertThat(app.getBean(KeyStore.class)).isInstanceOf(PostgresKeyStore.class);
        URI base =
            URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
        HttpClient http = HttpClient.newHttpClient();
        String key = "\"" + UUID.randomUUID() + "\"";
        int before =
            PaymentsApplication.RUNS
                .computeIfAbsent("withdraw", k -> new java.util.concurrent.atomic.AtomicInteger())
                .get();
        HttpResponse<String> first = null;
        HttpResponse<String> again = null;
        for (int i = 0; i < 2; i++) {
          HttpResponse<String> r =
              http.send(
                  HttpRequest.newBuilder(base.resolve("/accounts/a1/withdrawals"))
                      .timeout(Duration.ofSeconds(30))
                      .header("Content-Type", "application/json")
                      .header("Idempotency-Key", key)
                      .header("X-Tenant", "t1")
                      .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":30}"))
                      .build(),
                  HttpResponse.BodyHandlers.ofString());
          if (i == 0) {
            first = r;
          } else {
            again = r;
          }
        }
        assertThat(first.statusCode()).isEqualTo(201);
        assertThat(again.statusCode()).isEqualTo(201);
        assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(again.body()).isEqualTo(first.body());
        assertThat(PaymentsApplication.RUNS.get("withdraw").get()).isEqualTo(before + 1);
        HttpResponse<String> reused =
            http.send(
                HttpRequest.newBuilder(base.resolve("/accounts/a1/withdrawals"))
                    .header("Content-Type", "application/json")
                    .header("Idempotency-Key", key)
                    .header("X-Tenant", "t1")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":31}"))
                    .build(),
                HttpResponse.BodyHandlers.ofString());
        String type = base.resolve("/docs/errors/key-reused").toString();
        assertThat(reused.body()).contains("\"type\":\"" + type + "\"");
        HttpResponse<String> page =
            http.send(
                HttpRequest.newBuilder(URI.create(type)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(page.statusCode()).isEqualTo(200);
        assertThat(page.body()).contains("<h1>Idempotency-Key reused</h1>");
        try (var c = pg.connect();
            var s = c.createStatement();
            var rs = s.executeQuery("SELECT count(*) FROM idem_keys")) {
          assertThat(rs.next()).isTrue();
          assertThat(rs.getLong(1)).as("the record is in the application's database").isEqualTo(1);
        }
      }
    }
  }
}
