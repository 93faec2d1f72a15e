package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.http.IdempotencyFilter;
import io.idem.keys.idem.IdemKeyStore;
import io.idem.keys.spi.KeyStore;
import io.idem.spring.app.PaymentsApplication;
import io.idem.testkit.LocalCluster;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringApplication;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * A real Spring Boot application (Spring MVC on embedded Tomcat, random port) started by the test
 * with the starter on its class path and {@code idem.keys.servers} pointing at a real in-process
 * Idem cluster; requests over real HTTP with the JDK's HttpClient.
 */
@Timeout(180)
class IdempotentSpringApplicationTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static ConfigurableApplicationContext app;
  static URI base;
  static final HttpClient http = HttpClient.newHttpClient();

  @BeforeAll
  static void start() {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
    app =
        new SpringApplication(PaymentsApplication.class)
            .run(
                "--server.port=0",
                "--server.address=127.0.0.1",
                "--idem.keys.servers=" + String.join(",", cluster.clientAddresses()),
                "--idem.keys.scope-header=X-Tenant",
                "--idem.keys.max-body-size=2KB",
                "--logging.level.org.apache.ratis=WARN",
                "--logging.level.io.idem=WARN",
                "--spring.main.banner-mode=off");
    base = URI.create("http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port"));
  }

  @AfterAll
  static void stop() {
    if (app != null) {
      app.close();
    }
    cluster.close();
  }

  static String newKey() {
    return "\"" + UUID.randomUUID() + "\"";
  }

  static HttpResponse<String> post(String path, String key, String json, String tenant)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(base.resolve(path))
            .timeout(Duration.ofSeconds(60))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(json));
    if (key != null) {
      b.header("Idempotency-Key", key);
    }
    if (tenant != null) {
      b.header("X-Tenant", tenant);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static HttpResponse<String> post(String path, String key, String json) throws Exception {
    return post(path, key, json, "t1");
  }

  static int runs(String endpoint) {
    AtomicInteger n = PaymentsApplication.RUNS.get(endpoint);
    return n == null ? 0 : n.get();
  }

  /**
   * {@code r} is the problem {@code name}, whose type is the URL of its documentation page, which
   * the filter serves in this application (fetched here over HTTP).
   */
  static void assertProblem(HttpResponse<String> r, int status, String name) throws Exception {
    assertThat(r.statusCode()).isEqualTo(status);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    String type = base.resolve("/problems/idempotency/" + name).toString();
    assertThat(r.body())
        .contains("\"type\":\"" + type + "\"")
        .contains("\"title\":\"")
        .contains("\"instance\":\"" + r.request().uri().getRawPath() + "\"");
    HttpResponse<String> page =
        http.send(
            HttpRequest.newBuilder(URI.create(type)).build(), HttpResponse.BodyHandlers.ofString());
    assertThat(page.statusCode()).as(type).isEqualTo(200);
    assertThat(page.headers().firstValue("Content-Type").orElseThrow()).startsWith("text/html");
    assertThat(page.body()).contains("<code>" + type + "</code>");
  }

  @Test
  void theStarterMadeTheIdemStoreAndTheFilter() {
    assertThat(app.getBean(KeyStore.class)).isInstanceOf(IdemKeyStore.class);
    assertThat(app.getBean(IdemClient.class)).isNotNull();
    assertThat(app.getBean(IdempotencyFilter.class)).isNotNull();
  }

  @Test
  void anIdempotentWithdrawalRunsOnceAndIsReplayedWithItsKeyBound() throws Exception {
    String key = newKey();
    HttpResponse<String> first = post("/accounts/alice/withdrawals", key, "{\"amount\":30}");
    HttpResponse<String> again = post("/accounts/alice/withdrawals", key, "{\"amount\":30}");
    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(first.body()).contains("\"id\":\"" + key.replace("\"", "") + "\"");
    assertThat(again.statusCode()).isEqualTo(201);
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(again.body()).isEqualTo(first.body());
    assertThat(again.headers().firstValue("Location"))
        .isEqualTo(first.headers().firstValue("Location"))
        .isPresent();
    int before = runs("withdraw");
    assertProblem(post("/accounts/alice/withdrawals", key, "{\"amount\":31}"), 422, "key-reused");
    assertProblem(post("/accounts/alice/withdrawals", null, "{\"amount\":30}"), 400, "key-missing");
    assertProblem(post("/accounts/alice/withdrawals", "unquoted", "{}"), 400, "key-malformed");
    assertProblem(
        post("/accounts/alice/withdrawals", newKey(), "{\"pad\":\"" + "x".repeat(3000) + "\"}"),
        413,
        "body-too-large");
    assertThat(runs("withdraw")).isEqualTo(before);
  }

  @Test
  void aDuplicateInProgressGets409OrWaitsWhereTheEndpointSaysSo() throws Exception {
    for (String endpoint : new String[] {"held", "waiting"}) {
      PaymentsApplication.entered = new CountDownLatch(1);
      PaymentsApplication.release = new CountDownLatch(1);
      String key = newKey();
      HttpRequest request =
          HttpRequest.newBuilder(base.resolve("/" + endpoint))
              .header("Idempotency-Key", key)
              .header("X-Tenant", "t1")
              .header("Content-Type", "application/json")
              .POST(HttpRequest.BodyPublishers.ofString("{}"))
              .build();
      CompletableFuture<HttpResponse<String>> first =
          http.sendAsync(request, HttpResponse.BodyHandlers.ofString());
      assertThat(PaymentsApplication.entered.await(30, TimeUnit.SECONDS)).isTrue();
      CompletableFuture<HttpResponse<String>> duplicate =
          http.sendAsync(request, HttpResponse.BodyHandlers.ofString());
      if (endpoint.equals("held")) {
        HttpResponse<String> d = duplicate.get(30, TimeUnit.SECONDS);
        assertProblem(d, 409, "key-in-progress");
        PaymentsApplication.release.countDown();
      } else {
        Thread.sleep(300);
        assertThat(duplicate).isNotDone(); // it waits for the first
        PaymentsApplication.release.countDown();
        HttpResponse<String> d = duplicate.get(30, TimeUnit.SECONDS);
        assertThat(d.statusCode()).isEqualTo(200);
        assertThat(d.headers().firstValue("Idempotent-Replayed")).hasValue("true");
        assertThat(d.body()).isEqualTo(first.get(30, TimeUnit.SECONDS).body());
      }
      assertThat(first.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
      assertThat(runs(endpoint)).isEqualTo(1);
    }
  }

  @Test
  void anEndpointWithoutIdempotentIsNotCovered() throws Exception {
    String key = newKey();
    HttpResponse<String> a = post("/plain", key, "{}");
    HttpResponse<String> b = post("/plain", key, "{}");
    assertThat(b.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(a.body()).contains("\"key\":\"null\""); // the filter did not take it
    assertThat(runs("plain")).isEqualTo(2);
  }

  @Test
  void serverErrorsAreStoredOrReleasedPerEndpoint() throws Exception {
    PaymentsApplication.failuresLeft.set(1);
    String key = newKey();
    HttpResponse<String> stored = post("/stored-5xx", key, "{}");
    HttpResponse<String> replayed = post("/stored-5xx", key, "{}");
    assertThat(stored.statusCode()).isEqualTo(503);
    assertThat(replayed.statusCode()).isEqualTo(503);
    assertThat(replayed.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(runs("stored-5xx")).isEqualTo(1);

    PaymentsApplication.failuresLeft.set(1);
    String k2 = newKey();
    assertThat(post("/released-5xx", k2, "{}").statusCode()).isEqualTo(500);
    HttpResponse<String> rerun = post("/released-5xx", k2, "{}");
    assertThat(rerun.statusCode()).isEqualTo(201);
    assertThat(rerun.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(runs("released-5xx")).isEqualTo(2);
  }

  @Test
  void keysAreScopedToTheCallerNamedByTheScopeHeader() throws Exception {
    String key = newKey();
    int before = runs("withdraw");
    HttpResponse<String> t1 = post("/accounts/bob/withdrawals", key, "{\"amount\":5}", "t1");
    HttpResponse<String> t2 = post("/accounts/bob/withdrawals", key, "{\"amount\":5}", "t2");
    assertThat(t2.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(t2.body()).isNotEqualTo(t1.body());
    assertProblem(
        post("/accounts/bob/withdrawals", key, "{\"amount\":5}", null), 400, "scope-missing");
    assertThat(runs("withdraw")).isEqualTo(before + 2);
  }

  @Test
  void aHandlerHandsItsDebitToTheStoreThroughIdempotentRequest() throws Exception {
    IdemClient client = app.getBean(IdemClient.class);
    String account = "acct-" + UUID.randomUUID();
    client.put("balance/" + account, "100");
    String key = newKey();
    for (int i = 0; i < 3; i++) {
      assertThat(post("/debits/" + account, key, "{}").statusCode()).isEqualTo(201);
    }
    assertThat(client.get("balance/" + account).orElseThrow().valueAsString()).isEqualTo("90");
    assertThat(runs("debit")).isEqualTo(1);
  }
}
