package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.redis.RedisKeyRecord;
import io.idem.keys.redis.RedisKeyStore;
import io.idem.keys.spi.KeyStore;
import io.idem.spring.app.PaymentsApplication;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * The starter on the Redis store: a real Spring Boot application with {@code idem.keys.redis.uri}
 * pointing at a private redis-server gets {@link RedisKeyStore} as its key store, replays a retried
 * POST without running it again, refuses the key with another body (422, its type under the
 * configured {@code idem.keys.problem-types.base}), and keeps the record in Redis under the
 * configured prefix.
 */
@Timeout(180)
class RedisStoreStarterTest {
  static final String PREFIX = "starter-test";
  static final String TENANT = "t1";
  static final String DOCS = "https://docs.example.com/errors/";

  @TempDir Path dir;

  @Test
  void theStarterMakesTheRedisStoreFromItsUri() throws Exception {
    try (RedisServer redis = RedisServer.start(dir.resolve("redis"), RedisServer.Aof.OFF);
        ConfigurableApplicationContext app =
            new SpringApplication(PaymentsApplication.class)
                .run(
                    "--server.port=0",
                    "--server.address=127.0.0.1",
                    "--idem.keys.redis.uri=" + redis.uri(),
                    "--idem.keys.redis.prefix=" + PREFIX,
                    "--idem.keys.scope-header=X-Tenant",
                    "--idem.keys.problem-types.base=" + DOCS,
                    "--logging.level.io.idem=WARN",
                    "--spring.main.banner-mode=off")) {
      assertThat(app.getBean(KeyStore.class)).isInstanceOf(RedisKeyStore.class);
      URI base =
          URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
      HttpClient http = HttpClient.newHttpClient();
      String key = UUID.randomUUID().toString();
      AtomicInteger runs =
          PaymentsApplication.RUNS.computeIfAbsent("withdraw", k -> new AtomicInteger());
      int before = runs.get();

      HttpResponse<String> first = withdraw(http, base, key, 30);
      HttpResponse<String> again = withdraw(http, base, key, 30);
      HttpResponse<String> otherBody = withdraw(http, base, key, 31);

      assertThat(first.statusCode()).as(first.body()).isEqualTo(201);
      assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
      assertThat(again.statusCode()).isEqualTo(201);
      assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(again.body()).isEqualTo(first.body());
      assertThat(otherBody.statusCode()).as(otherBody.body()).isEqualTo(422);
      assertThat(otherBody.body()).contains("\"type\":\"" + DOCS + "key-reused\"");
      HttpResponse<String> page =
          http.send(
              HttpRequest.newBuilder(base.resolve("/problems/idempotency/key-reused")).build(),
              HttpResponse.BodyHandlers.ofString());
      assertThat(page.statusCode()).as("with a base, the filter serves no page").isEqualTo(404);
      assertThat(runs.get()).as("the handler ran once").isEqualTo(before + 1);

      // The record, completed, in the application's Redis under the configured prefix: the
      // store's layout is {prefix}:k:<scope length>:<scope>:<key>, a packed record (read back
      // through a store of this test's own).
      String scope = "header:v:" + TENANT; // the filter's scope for the X-Tenant header
      String record = "{" + PREFIX + "}:k:" + scope.length() + ":" + scope + ":" + key;
      RedisClient client = RedisClient.create(redis.uri());
      try (StatefulRedisConnection<String, String> c = client.connect();
          RedisKeyStore shown = RedisKeyStore.builder().client(client).prefix(PREFIX).build()) {
        assertThat(c.sync().exists(record)).as("record " + record).isEqualTo(1L);
        RedisKeyRecord r =
            shown.show(new IdempotencyKey(scope, key)).toCompletableFuture().join().orElseThrow();
        assertThat(r.completed()).as("completed").isTrue();
        assertThat(r.response()).as("the stored response").isNotEmpty();
        assertThat(c.sync().keys("{" + PREFIX + "}:k:*")).containsExactly(record);
      } finally {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    }
  }

  private static HttpResponse<String> withdraw(HttpClient http, URI base, String key, int amount)
      throws Exception {
    return http.send(
        HttpRequest.newBuilder(base.resolve("/accounts/a1/withdrawals"))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", "\"" + key + "\"")
            .header("X-Tenant", TENANT)
            .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":" + amount + "}"))
            .build(),
        HttpResponse.BodyHandlers.ofString());
  }
}
