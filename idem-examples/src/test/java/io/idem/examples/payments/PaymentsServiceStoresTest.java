package io.idem.examples.payments;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.PostgresServer;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The payments service on the Redis and PostgreSQL stores, started from its command line ({@code
 * --store redis|postgres}) against a private redis-server or PostgreSQL server, over real HTTP: a
 * first withdrawal debits once and its {@code Location} reads it back from the store, its replay
 * debits nothing, the plain endpoint debits without a key; and bad options are refused with exit
 * code 2.
 */
class PaymentsServiceStoresTest {
  static final long OPENING = 1_000;
  static final HttpClient http = HttpClient.newHttpClient();

  @TempDir Path dir;

  @Test
  @Timeout(60)
  void onRedisAReplayDoesNotDebitAgain() throws Exception {
    try (RedisServer redis = RedisServer.start(dir.resolve("redis"), RedisServer.Aof.OFF)) {
      RedisClient client = RedisClient.create(redis.uri());
      try (StatefulRedisConnection<String, String> c = client.connect()) {
        String balanceKey = "{pay-test}:balance/alice";
        withdrawTwiceThenPlain(
            new String[] {
              "--store", "redis", "--redis-uri", redis.uri(), "--redis-prefix", "pay-test"
            },
            () -> Long.parseLong(c.sync().get(balanceKey)));
        assertThat(c.sync().keys("{pay-test}:k:*")).as("the key's record, in Redis").hasSize(1);
      } finally {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    }
  }

  @Test
  @Timeout(120)
  void onPostgresAReplayDoesNotDebitAgain() throws Exception {
    try (PostgresServer pg = PostgresServer.startFast();
        Connection c = pg.connect()) {
      withdrawTwiceThenPlain(
          new String[] {"--store", "postgres", "--jdbc-url", pg.jdbcUrl(), "--pool", "4"},
          () -> {
            try (Statement s = c.createStatement();
                ResultSet r =
                    s.executeQuery(
                        "SELECT balance FROM payments_accounts WHERE account = 'alice'")) {
              assertThat(r.next()).isTrue();
              return r.getLong(1);
            } catch (java.sql.SQLException e) {
              throw new IllegalStateException(e);
            }
          });
      try (Statement s = c.createStatement();
          ResultSet r = s.executeQuery("SELECT state FROM idem_keys")) {
        assertThat(r.next()).isTrue();
        assertThat(r.getString(1))
            .as("the key, completed in the debit's transaction")
            .isEqualTo("completed");
        assertThat(r.next()).as("one key").isFalse();
      }
    }
  }

  @Test
  void badOptionsExitWithTwo() throws Exception {
    CountDownLatch never = new CountDownLatch(1);
    assertThat(PaymentsService.serve(new String[] {"--store", "mongo"}, never)).isEqualTo(2);
    assertThat(PaymentsService.serve(new String[] {"--store", "redis"}, never)).isEqualTo(2);
    assertThat(PaymentsService.serve(new String[] {"--store", "postgres"}, never)).isEqualTo(2);
    assertThat(PaymentsService.serve(new String[] {"--store"}, never)).isEqualTo(2);
    assertThat(
            PaymentsService.serve(
                new String[] {"--store", "postgres", "--jdbc-url", "jdbc:mysql://x/y"}, never))
        .isEqualTo(2);
  }

  /**
   * Serves with {@code args} on a free port; withdraws 30 with a key, again with the same key (a
   * replay), then 5 on the plain endpoint, checking the balance on the store after each.
   */
  private static void withdrawTwiceThenPlain(String[] storeArgs, LongSupplier balance)
      throws Exception {
    int port = LocalCluster.freePort();
    String[] args = new String[storeArgs.length + 4];
    System.arraycopy(storeArgs, 0, args, 0, storeArgs.length);
    System.arraycopy(
        new String[] {"--port", Integer.toString(port), "--balance", Long.toString(OPENING)},
        0,
        args,
        storeArgs.length,
        4);
    CountDownLatch stop = new CountDownLatch(1);
    ExecutorService thread = Executors.newSingleThreadExecutor();
    try {
      Future<Integer> served = thread.submit(() -> PaymentsService.serve(args, stop));
      URI base = URI.create("http://127.0.0.1:" + port);
      awaitUp(base, served);
      assertThat(balance.getAsLong()).isEqualTo(OPENING);

      String key = "\"w " + UUID.randomUUID() + " \\\"x\\\"\""; // a space and quotes: escaped
      HttpResponse<String> first = post(base, "/accounts/alice/withdrawals", key, 30);
      assertThat(first.statusCode()).as(first.body()).isEqualTo(201);
      assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
      assertThat(balance.getAsLong()).as("debited once").isEqualTo(OPENING - 30);
      // Its Location reads it back from the key store's record.
      HttpResponse<String> withdrawal =
          http.send(
              HttpRequest.newBuilder(
                      base.resolve(new URI(first.headers().firstValue("Location").orElseThrow())))
                  .timeout(Duration.ofSeconds(10))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(withdrawal.statusCode()).as(withdrawal.body()).isEqualTo(200);
      assertThat(withdrawal.body()).isEqualTo(first.body());

      HttpResponse<String> replay = post(base, "/accounts/alice/withdrawals", key, 30);
      assertThat(replay.statusCode()).isEqualTo(201);
      assertThat(replay.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(replay.body()).isEqualTo(first.body());
      assertThat(balance.getAsLong()).as("the replay debits nothing").isEqualTo(OPENING - 30);

      HttpResponse<String> reused = post(base, "/accounts/alice/withdrawals", key, 31);
      assertThat(reused.statusCode()).as(reused.body()).isEqualTo(422);

      HttpResponse<String> plain = post(base, "/plain/accounts/alice/withdrawals", null, 5);
      assertThat(plain.statusCode()).as(plain.body()).isEqualTo(201);
      assertThat(plain.headers().firstValue("Location")).as("no key, no withdrawal").isEmpty();
      assertThat(balance.getAsLong()).isEqualTo(OPENING - 35);

      HttpResponse<String> read =
          http.send(
              HttpRequest.newBuilder(base.resolve("/accounts/alice"))
                  .timeout(Duration.ofSeconds(10))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(read.body()).contains("\"balance\":" + (OPENING - 35));

      stop.countDown();
      assertThat(served.get(30, TimeUnit.SECONDS)).isZero();
    } finally {
      stop.countDown();
      thread.shutdownNow();
      assertThat(thread.awaitTermination(30, TimeUnit.SECONDS)).isTrue();
    }
  }

  private static HttpResponse<String> post(URI base, String path, String key, long amount)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(base.resolve(path))
            .timeout(Duration.ofSeconds(20))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":" + amount + "}"));
    if (key != null) {
      b.header("Idempotency-Key", key);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  /** Polls GET until the service answers, at most 30 s; fails early if it exited. */
  private static void awaitUp(URI base, Future<Integer> served) throws Exception {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      if (served.isDone()) {
        throw new AssertionError("the service exited with " + served.get());
      }
      try {
        http.send(
            HttpRequest.newBuilder(base.resolve("/accounts/alice"))
                .timeout(Duration.ofSeconds(2))
                .build(),
            HttpResponse.BodyHandlers.discarding());
        return;
      } catch (java.io.IOException e) {
        if (System.nanoTime() > end) {
          throw new AssertionError("the service did not answer in 30 s", e);
        }
        Thread.sleep(100);
      }
    }
  }
}
