package io.idem.examples.payments;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotentRequest;
import io.idem.http.TransactionalKeys;
import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.testkit.stores.PostgresServer;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.atomic.AtomicInteger;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The filter over {@link TransactionalKeys} on a private PostgreSQL server, on an embedded Jetty,
 * over real HTTP: a handler's write through the request's transaction is rolled back with the key
 * when it answers 5xx (a retry runs again), commits with the stored response otherwise, and a
 * replay writes nothing.
 */
class TransactionalFilterTest {
  static final AtomicInteger failuresLeft = new AtomicInteger();
  static final AtomicInteger runs = new AtomicInteger();

  /** Inserts a row through the request's transaction; answers 503 while failures are left. */
  static final class Writes extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doPost(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      runs.incrementAndGet();
      Connection c =
          IdempotentRequest.of(req).orElseThrow().transaction(Connection.class).orElseThrow();
      try (PreparedStatement s = c.prepareStatement("INSERT INTO writes (what) VALUES (?)")) {
        s.setString(1, req.getPathInfo());
        s.executeUpdate();
      } catch (SQLException e) {
        throw new IOException(e);
      }
      resp.setStatus(failuresLeft.getAndDecrement() > 0 ? 503 : 201);
      resp.getOutputStream()
          .write(("run " + runs.get()).getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }
  }

  @Test
  @Timeout(120)
  void aServerErrorRollsTheHandlersWriteBackWithTheKey() throws Exception {
    try (PostgresServer pg = PostgresServer.startFast();
        HikariDataSource pool = pg.pool(4, 5_000);
        PostgresKeyStore keys = PostgresKeyStore.builder(pool).build();
        Connection check = pg.connect()) {
      keys.migrate();
      try (Statement s = check.createStatement()) {
        s.execute("CREATE TABLE writes (what text NOT NULL)");
      }
      TransactionalKeys transactional =
          (key, fingerprint, step) -> {
            try (Connection c = pool.getConnection()) {
              return keys.inTransaction(c, key, fingerprint, step::run);
            }
          };
      Server server = new Server();
      ServerConnector connector = new ServerConnector(server);
      connector.setHost("127.0.0.1");
      server.addConnector(connector);
      ServletContextHandler context = new ServletContextHandler();
      context.addServlet(new ServletHolder(new Writes()), "/writes/*");
      IdempotencyFilter filter =
          IdempotencyFilter.builder(transactional).anonymousScope("test").build();
      context.addFilter(new FilterHolder(filter), "/*", EnumSet.of(DispatcherType.REQUEST));
      server.setHandler(context);
      server.start();
      try {
        URI base = URI.create("http://127.0.0.1:" + connector.getLocalPort());
        HttpClient http = HttpClient.newHttpClient();
        failuresLeft.set(1);

        HttpResponse<String> failed = post(http, base, "k1");
        assertThat(failed.statusCode()).isEqualTo(503);
        assertThat(count(check, "SELECT count(*) FROM writes")).as("rolled back").isZero();
        assertThat(count(check, "SELECT count(*) FROM idem_keys")).as("key released").isZero();

        HttpResponse<String> ran = post(http, base, "k1");
        assertThat(ran.statusCode()).isEqualTo(201);
        assertThat(ran.headers().firstValue("Idempotent-Replayed")).isEmpty();
        HttpResponse<String> replayed = post(http, base, "k1");
        assertThat(replayed.statusCode()).isEqualTo(201);
        assertThat(replayed.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(replayed.body()).isEqualTo(ran.body()).isEqualTo("run 2");
        assertThat(runs.get()).isEqualTo(2);
        assertThat(count(check, "SELECT count(*) FROM writes")).as("one write, kept").isEqualTo(1);
        assertThat(count(check, "SELECT count(*) FROM idem_keys WHERE state = 'completed'"))
            .isEqualTo(1);
      } finally {
        server.stop();
        filter.close();
      }
    }
  }

  private static HttpResponse<String> post(HttpClient http, URI base, String key) throws Exception {
    return http.send(
        HttpRequest.newBuilder(base.resolve("/writes/a"))
            .timeout(Duration.ofSeconds(20))
            .header("Idempotency-Key", "\"" + key + "\"")
            .POST(HttpRequest.BodyPublishers.ofString("{}"))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static long count(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }
}
