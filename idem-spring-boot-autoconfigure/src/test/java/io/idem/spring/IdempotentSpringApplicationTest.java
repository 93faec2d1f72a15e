package io.idem.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.Write;
import io.idem.http.IdempotencyFilter;
import io.idem.keys.Fingerprint;
import io.idem.keys.idem.IdemKeyStore;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
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
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.mock.web.MockHttpServletRequest;

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
    assertProblem(base, r, status, name);
  }

  /** As {@link #assertProblem(HttpResponse, int, String)}, from the application at {@code base}. */
  static void assertProblem(URI base, HttpResponse<String> r, int status, String name)
      throws Exception {
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
  void theStarterMadeTheIdemStoreAndTheFilter() throws Exception {
    // One client, the starter's, over idem.keys.servers; the store is the Idem store on that
    // cluster: a key it acquires is what the client reads back.
    assertThat(app.getBeansOfType(IdemClient.class)).containsOnlyKeys("idemKeysClient");
    IdemClient client = app.getBean(IdemClient.class);
    KeyStore<?> store = app.getBean(KeyStore.class);
    assertThat(store).isInstanceOf(IdemKeyStore.class);
    io.idem.keys.IdempotencyKey probe =
        new io.idem.keys.IdempotencyKey("starter-wiring", UUID.randomUUID().toString());
    Acquisition acquired =
        store
            .acquire(
                probe,
                Fingerprint.of(new byte[] {1}),
                Duration.ofSeconds(30),
                Duration.ofMinutes(1))
            .toCompletableFuture()
            .get(30, TimeUnit.SECONDS);
    assertThat(acquired).isInstanceOf(Acquisition.Acquired.class);
    assertThat(client.getKey(probe.scope(), probe.key()).orElseThrow().token())
        .isEqualTo(((Acquisition.Acquired) acquired).token());

    // The filter is the one registered with the servlet container, with idem.keys.* applied:
    // the scope header X-Tenant names the caller.
    IdempotencyFilter filter = app.getBean(IdempotencyFilter.class);
    @SuppressWarnings("unchecked")
    FilterRegistrationBean<IdempotencyFilter> registration =
        app.getBean("idempotencyFilterRegistration", FilterRegistrationBean.class);
    assertThat(registration.getFilter()).isSameAs(filter);
    assertThat(registration.getOrder()).isZero();
    MockHttpServletRequest request = new MockHttpServletRequest("POST", "/held");
    assertThat(filter.scopeOf(request)).isEmpty();
    request.addHeader("X-Tenant", "t9");
    assertThat(filter.scopeOf(request)).hasValue("header:v:t9");
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
    // This application wraps the Idem store in its own KeyStore bean that reports each "in
    // progress" answer: the first request is released only once the waiting duplicate was told
    // the key is in progress and asked again, so it cannot pass by arriving after the completion.
    try (ConfigurableApplicationContext observed =
        new SpringApplication(PaymentsApplication.class, ObservedStore.class)
            .run(
                "--server.port=0",
                "--server.address=127.0.0.1",
                "--idem.keys.servers=" + String.join(",", cluster.clientAddresses()),
                "--idem.keys.scope-header=X-Tenant",
                "--logging.level.org.apache.ratis=WARN",
                "--logging.level.io.idem=WARN",
                "--spring.main.banner-mode=off")) {
      assertThat(observed.getBean(KeyStore.class)).isSameAs(observed.getBean("observedKeyStore"));
      URI at =
          URI.create(
              "http://127.0.0.1:" + observed.getEnvironment().getProperty("local.server.port"));
      for (String endpoint : new String[] {"held", "waiting"}) {
        PaymentsApplication.entered = new CountDownLatch(1);
        PaymentsApplication.release = new CountDownLatch(1);
        CountDownLatch toldInProgressTwice = new CountDownLatch(2);
        ObservedStore.toldInProgress = toldInProgressTwice;
        int before = runs(endpoint);
        String key = newKey();
        HttpRequest request =
            HttpRequest.newBuilder(at.resolve("/" + endpoint))
                .header("Idempotency-Key", key)
                .header("X-Tenant", "t1")
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{}"))
                .build();
        CompletableFuture<HttpResponse<String>> first =
            http.sendAsync(request, HttpResponse.BodyHandlers.ofString());
        try {
          assertThat(PaymentsApplication.entered.await(30, TimeUnit.SECONDS)).isTrue();
          CompletableFuture<HttpResponse<String>> duplicate =
              http.sendAsync(request, HttpResponse.BodyHandlers.ofString());
          if (endpoint.equals("held")) {
            HttpResponse<String> d = duplicate.get(30, TimeUnit.SECONDS);
            assertProblem(at, d, 409, "key-in-progress");
            assertThat(toldInProgressTwice.getCount())
                .as("told once, it did not ask again")
                .isOne();
          } else {
            assertThat(toldInProgressTwice.await(30, TimeUnit.SECONDS))
                .as("the duplicate asked again after the store told it the key is in progress")
                .isTrue();
            assertThat(duplicate).as("the duplicate is waiting for the first").isNotDone();
            PaymentsApplication.release.countDown();
            HttpResponse<String> d = duplicate.get(30, TimeUnit.SECONDS);
            assertThat(d.statusCode()).isEqualTo(200);
            assertThat(d.headers().firstValue("Idempotent-Replayed")).hasValue("true");
            assertThat(d.body()).isEqualTo(first.get(30, TimeUnit.SECONDS).body());
          }
        } finally {
          PaymentsApplication.release.countDown();
        }
        assertThat(first.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(200);
        assertThat(runs(endpoint)).isEqualTo(before + 1);
      }
    }
  }

  /**
   * An application's own key store: the Idem store over the starter's client, counting {@link
   * #toldInProgress} down at each acquire it answers with "in progress". Outside the application's
   * package, so that only the test that names it uses it.
   */
  @Configuration(proxyBeanMethods = false)
  static class ObservedStore {
    static volatile CountDownLatch toldInProgress = new CountDownLatch(0);

    @Bean
    KeyStore<Write> observedKeyStore(IdemClient client) {
      IdemKeyStore idem = IdemKeyStore.over(client);
      return new KeyStore<>() {
        @Override
        public CompletionStage<Acquisition> acquire(
            io.idem.keys.IdempotencyKey k, Fingerprint f, Duration t, Duration r) {
          return idem.acquire(k, f, t, r)
              .thenApply(
                  a -> {
                    if (a instanceof Acquisition.InProgress) {
                      toldInProgress.countDown();
                    }
                    return a;
                  });
        }

        @Override
        public CompletionStage<Settlement> complete(
            io.idem.keys.IdempotencyKey k, long token, byte[] response) {
          return idem.complete(k, token, response);
        }

        @Override
        public CompletionStage<Settlement> completeWith(
            io.idem.keys.IdempotencyKey k, long token, byte[] response, Write effect) {
          return idem.completeWith(k, token, response, effect);
        }

        @Override
        public Class<?> effectType() {
          return idem.effectType();
        }

        @Override
        public CompletionStage<Settlement> release(io.idem.keys.IdempotencyKey k, long token) {
          return idem.release(k, token);
        }

        @Override
        public CompletionStage<Settlement> renew(
            io.idem.keys.IdempotencyKey k, long token, Duration extension) {
          return idem.renew(k, token, extension);
        }
      };
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
