package io.idem.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.Write;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.StoredOutcomes;
import io.idem.keys.idem.IdemKeyStore;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Quotas;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpResponse.BodyHandlers;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The filter over real HTTP: a Jetty 12 server on a loopback port, the JDK's HttpClient, and the
 * Idem store on a real in-process cluster. Every status the filter answers has a test here.
 */
@Timeout(120)
class IdempotencyFilterTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static IdemClient client;
  static Observed store;
  static IdempotencyFilter filter;
  static EmbeddedJetty jetty;
  static final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

  /** Runs of the handler, per path. */
  static final Map<String, AtomicInteger> runs = new ConcurrentHashMap<>();

  static volatile CountDownLatch holdEntered = new CountDownLatch(1);
  static volatile CountDownLatch holdRelease = new CountDownLatch(1);
  static final AtomicInteger flakyFailuresLeft = new AtomicInteger();

  @BeforeAll
  static void start() throws Exception {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
    client = IdemClient.builder().servers(cluster.clientAddresses()).build();
    store = new Observed(IdemKeyStore.over(client));
    filter =
        IdempotencyFilter.builder(store)
            .scopeHeader("X-Tenant")
            .maxBodyBytes(4096)
            .maxResponseBytes(8192)
            .policyResolver(IdempotencyFilterTest::policy)
            .build();
    Map<String, HttpServlet> servlets = new LinkedHashMap<>();
    servlets.put("/*", new Scripted());
    jetty =
        EmbeddedJetty.start(
            filter, servlets, Map.of("alice", "alice-password", "bob", "bob-password"));
  }

  @AfterAll
  static void stop() throws Exception {
    jetty.close();
    filter.destroy();
    client.close();
    cluster.close();
  }

  /** The Idem store, counting the acquisitions of each key as it passes them on. */
  static final class Observed implements KeyStore<Write> {
    private final KeyStore<Write> store;
    private final Map<IdempotencyKey, AtomicInteger> acquisitions = new ConcurrentHashMap<>();

    Observed(KeyStore<Write> store) {
      this.store = store;
    }

    int acquisitions(String scope, String sfKey) {
      AtomicInteger n = acquisitions.get(new IdempotencyKey(scope, unquote(sfKey)));
      return n == null ? 0 : n.get();
    }

    @Override
    public CompletionStage<Acquisition> acquire(
        IdempotencyKey key, Fingerprint fingerprint, Duration inProgress, Duration retention) {
      acquisitions.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
      return store.acquire(key, fingerprint, inProgress, retention);
    }

    @Override
    public CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response) {
      return store.complete(key, token, response);
    }

    @Override
    public CompletionStage<Settlement> completeWith(
        IdempotencyKey key, long token, byte[] response, Write effect) {
      return store.completeWith(key, token, response, effect);
    }

    @Override
    public Class<?> effectType() {
      return store.effectType();
    }

    @Override
    public CompletionStage<Settlement> release(IdempotencyKey key, long token) {
      return store.release(key, token);
    }

    @Override
    public CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension) {
      return store.renew(key, token, extension);
    }
  }

  /** Per-path policies, as the Spring starter's {@code @Idempotent} gives them. */
  static IdempotencyPolicy policy(HttpServletRequest request) {
    String path = request.getRequestURI();
    if (path.startsWith("/required")) {
      return IdempotencyPolicy.builder().keyRequired(true).build();
    }
    if (path.startsWith("/wait")) {
      return IdempotencyPolicy.builder().waitForResult(Duration.ofSeconds(30)).build();
    }
    if (path.startsWith("/stored5xx")) {
      return IdempotencyPolicy.builder().storeServerErrors(true).build();
    }
    if (path.startsWith("/uncovered")) {
      return null;
    }
    return IdempotencyPolicy.DEFAULTS;
  }

  /** The endpoints: each counts its runs and answers what it ran. */
  static final class Scripted extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void service(HttpServletRequest req, HttpServletResponse resp) throws IOException {
      String path = req.getRequestURI();
      int run = runs.computeIfAbsent(path, p -> new AtomicInteger()).incrementAndGet();
      // Form endpoints read parameters only, as form handlers do.
      String body =
          path.startsWith("/form") || path.startsWith("/charset/form")
              ? ""
              : new String(req.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (path.endsWith("/hold")) {
        holdEntered.countDown();
        try {
          holdRelease.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      if (path.startsWith("/flaky") || path.startsWith("/stored5xx")) {
        if (flakyFailuresLeft.getAndDecrement() > 0) {
          resp.setStatus(503);
          resp.setContentType("text/plain");
          resp.getWriter().write("bank unreachable, run " + run);
          return;
        }
      }
      if (path.startsWith("/response-charset")) {
        resp.setStatus(201);
        resp.setContentType("text/plain; charset=bogus");
        resp.getWriter().write("run " + run + ", caf\u00e9");
        return;
      }
      if (path.startsWith("/declined")) {
        resp.sendError(402, "card declined, run " + run);
        return;
      }
      if (path.startsWith("/big")) {
        resp.setContentType("text/plain");
        resp.getOutputStream().write(("run " + run + " ").getBytes(StandardCharsets.UTF_8));
        resp.getOutputStream().write(new byte[10_000]);
        return;
      }
      if (path.startsWith("/effect")) {
        IdempotentRequest.of(req)
            .orElseThrow()
            .completeWith(Write.increment("balance/" + body, -10));
      }
      if (path.startsWith("/wrong-effect")) {
        IdempotentRequest.of(req).orElseThrow().completeWith("INCRBY balance -10"); // not a Write
      }
      if (path.startsWith("/overtaken")) {
        // Before this run's outcome reaches the store, the key is completed with another one, as
        // when a takeover owner finished first: the stored outcome stands.
        IdempotentRequest r = IdempotentRequest.of(req).orElseThrow();
        byte[] other =
            new StoredResponse(
                    200,
                    List.of(new StoredResponse.Header("Content-Type", "text/plain")),
                    "finished by the other owner".getBytes(StandardCharsets.UTF_8),
                    false)
                .encode();
        store
            .complete(r.key(), r.fencingToken(), StoredOutcomes.success(other))
            .toCompletableFuture()
            .join();
      }
      String user = req.getUserPrincipal() == null ? "-" : req.getUserPrincipal().getName();
      resp.setStatus(201);
      resp.setContentType("application/json");
      resp.setHeader("Location", path + "/" + run);
      resp.setHeader("X-Run", Integer.toString(run)); // not a replayed header
      resp.getWriter()
          .write(
              "{\"run\":"
                  + run
                  + ",\"user\":\""
                  + user
                  + "\",\"form\":\""
                  + req.getParameter("a")
                  + "\",\"body\":\""
                  + body
                  + "\"}");
    }
  }

  static String newKey() {
    return "\"" + UUID.randomUUID() + "\"";
  }

  static HttpRequest.Builder post(String path, String key, String body) {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(jetty.uri(path))
            .timeout(Duration.ofSeconds(60))
            .header("X-Tenant", "t1")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (key != null) {
      b.header("Idempotency-Key", key);
    }
    return b;
  }

  static HttpResponse<String> send(HttpRequest.Builder b) throws Exception {
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static int runsOf(String path) {
    AtomicInteger n = runs.get(path);
    return n == null ? 0 : n.get();
  }

  /**
   * {@code r} is the problem {@code name} with {@code status}, a title and its path as instance,
   * and its type is the URL of a page that documents it: fetched here, over HTTP, from the filter.
   */
  static void assertProblem(HttpResponse<String> r, int status, String name) throws Exception {
    assertThat(r.statusCode()).isEqualTo(status);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(r.headers().firstValue("Location")).isEmpty(); // nothing of a handler's response
    assertThat(r.body()).contains("\"status\":" + status);
    String type = member(r.body(), "type");
    assertThat(type)
        .isEqualTo(r.request().uri().resolve(ProblemTypes.DEFAULT_PATH + name).toString());
    assertThat(member(r.body(), "instance")).isEqualTo(r.request().uri().getRawPath());
    String title = member(r.body(), "title");
    assertThat(title).isNotBlank();
    HttpResponse<String> page =
        http.send(HttpRequest.newBuilder(URI.create(type)).build(), BodyHandlers.ofString());
    assertThat(page.statusCode()).as(type).isEqualTo(200);
    assertThat(page.headers().firstValue("Content-Type").orElseThrow()).startsWith("text/html");
    assertThat(page.body()).contains("<code>" + type + "</code>").contains("<h2>What to do</h2>");
    if (!name.equals("handler-error")) { // whose title is the handler's status's reason phrase
      assertThat(page.body()).contains("<h1>" + title + "</h1>");
    }
  }

  /** The string member {@code name} of a flat JSON object, unescaped enough for these tests. */
  static String member(String json, String name) {
    java.util.regex.Matcher m =
        java.util.regex.Pattern.compile("\"" + name + "\":\"((?:[^\"\\\\]|\\\\.)*)\"")
            .matcher(json);
    assertThat(m.find()).as(name + " in " + json).isTrue();
    return m.group(1).replace("\\\"", "\"").replace("\\\\", "\\");
  }

  @Test
  void theFirstCallRunsAndARetryIsReplayedWithStatusChosenHeadersAndBody() throws Exception {
    String key = newKey();
    HttpResponse<String> first = send(post("/pay", key, "alice 100"));
    HttpResponse<String> again = send(post("/pay", key, "alice 100"));
    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(first.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(again.statusCode()).isEqualTo(201);
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(again.body()).isEqualTo(first.body()).contains("\"body\":\"alice 100\"");
    assertThat(again.headers().firstValue("Location"))
        .isEqualTo(first.headers().firstValue("Location"))
        .isPresent();
    assertThat(again.headers().firstValue("Content-Type"))
        .isEqualTo(first.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v).startsWith("application/json"));
    assertThat(again.headers().firstValue("X-Run")).isEmpty(); // not among the replayed headers
    assertThat(runsOf("/pay")).isEqualTo(1);
  }

  @Test
  void aMissingKeyIs400WhereRequiredAndRunsUntouchedElsewhere() throws Exception {
    assertProblem(send(post("/required", null, "x")), 400, "key-missing");
    assertThat(runsOf("/required")).isZero();
    for (int i = 0; i < 2; i++) {
      HttpResponse<String> r = send(post("/optional", null, "x"));
      assertThat(r.statusCode()).isEqualTo(201);
      assertThat(r.headers().firstValue("Idempotent-Replayed")).isEmpty();
    }
    assertThat(runsOf("/optional")).isEqualTo(2);
  }

  @Test
  void aMalformedKeyIs400AndAKeyOf255CharactersIsFine() throws Exception {
    for (String bad :
        new String[] {
          "unquoted-token",
          "\"no closing quote",
          "\"bad \\n escape\"",
          "\"" + "k".repeat(256) + "\"",
          "\"\"",
          "\"a\", \"b\"",
          "\"a\";Bad=1"
        }) {
      HttpResponse<String> r = send(post("/malformed", bad, "x"));
      assertProblem(r, 400, "key-malformed");
    }
    // Two field lines combine into a list: malformed too.
    HttpResponse<String> two =
        send(post("/malformed", "\"a\"", "x").header("Idempotency-Key", "\"b\""));
    assertProblem(two, 400, "key-malformed");
    assertThat(runsOf("/malformed")).isZero();
    String longest = "\"" + "k".repeat(254) + "\\\\" + "\"";
    assertThat(send(post("/malformed", longest, "x")).statusCode()).isEqualTo(201);
    String withParameters = "\"" + UUID.randomUUID() + "\";v=1;origin=\"mobile\";retry=?1";
    assertThat(send(post("/malformed", withParameters, "x")).statusCode()).isEqualTo(201);
    assertThat(runsOf("/malformed")).isEqualTo(2);
  }

  @Test
  void aKeyReusedWithAnotherBodyPathOrQueryIs422AndNothingRuns() throws Exception {
    String key = newKey();
    assertThat(send(post("/reuse", key, "alice 100")).statusCode()).isEqualTo(201);
    assertProblem(send(post("/reuse", key, "alice 999")), 422, "key-reused");
    assertProblem(send(post("/reuse-other", key, "alice 100")), 422, "key-reused");
    assertProblem(send(post("/reuse?amount=5", key, "alice 100")), 422, "key-reused");
    HttpRequest.Builder patch =
        HttpRequest.newBuilder(jetty.uri("/reuse"))
            .header("X-Tenant", "t1")
            .header("Idempotency-Key", key)
            .method("PATCH", HttpRequest.BodyPublishers.ofString("alice 100"));
    assertProblem(send(patch), 422, "key-reused");
    assertThat(runsOf("/reuse")).isEqualTo(1);
    assertThat(runsOf("/reuse-other")).isZero();
  }

  @Test
  void aDuplicateWhileTheFirstRunsGets409ThenTheReplay() throws Exception {
    holdEntered = new CountDownLatch(1);
    holdRelease = new CountDownLatch(1);
    String key = newKey();
    CompletableFuture<HttpResponse<String>> first =
        http.sendAsync(
            post("/conflict/hold", key, "b").build(), HttpResponse.BodyHandlers.ofString());
    assertThat(holdEntered.await(30, TimeUnit.SECONDS)).isTrue();
    HttpResponse<String> duplicate = send(post("/conflict/hold", key, "b"));
    assertProblem(duplicate, 409, "key-in-progress");
    // The owner's deadline, at most the in-progress timeout away (30 s by default).
    assertThat(duplicate.headers().firstValue("Retry-After").map(Long::parseLong))
        .hasValueSatisfying(seconds -> assertThat(seconds).isBetween(20L, 30L));
    holdRelease.countDown();
    assertThat(first.get(30, TimeUnit.SECONDS).statusCode()).isEqualTo(201);
    HttpResponse<String> later = send(post("/conflict/hold", key, "b"));
    assertThat(later.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(later.body()).isEqualTo(first.get().body());
    assertThat(runsOf("/conflict/hold")).isEqualTo(1);
  }

  @Test
  void inWaitModeADuplicateWaitsForTheFirstResponse() throws Exception {
    holdEntered = new CountDownLatch(1);
    holdRelease = new CountDownLatch(1);
    String key = newKey();
    CompletableFuture<HttpResponse<String>> first =
        http.sendAsync(post("/wait/hold", key, "w").build(), HttpResponse.BodyHandlers.ofString());
    assertThat(holdEntered.await(30, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<HttpResponse<String>> waiting =
        http.sendAsync(post("/wait/hold", key, "w").build(), HttpResponse.BodyHandlers.ofString());
    Thread.sleep(300); // the duplicate is waiting, not answered
    assertThat(waiting).isNotDone();
    holdRelease.countDown();
    HttpResponse<String> w = waiting.get(30, TimeUnit.SECONDS);
    assertThat(w.statusCode()).isEqualTo(201);
    assertThat(w.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(w.body()).isEqualTo(first.get(30, TimeUnit.SECONDS).body());
    assertThat(runsOf("/wait/hold")).isEqualTo(1);
  }

  static String basic(String user, String password) {
    return "Basic "
        + Base64.getEncoder()
            .encodeToString((user + ":" + password).getBytes(StandardCharsets.UTF_8));
  }

  @Test
  void keysAreScopedToThePrincipalOrTheScopeHeaderAndNeverGlobal() throws Exception {
    String key = newKey();
    HttpResponse<String> alice =
        send(
            post("/secure/pay", key, "p")
                .header("Authorization", basic("alice", "alice-password")));
    HttpResponse<String> bob =
        send(post("/secure/pay", key, "p").header("Authorization", basic("bob", "bob-password")));
    HttpResponse<String> aliceAgain =
        send(
            post("/secure/pay", key, "p")
                .header("Authorization", basic("alice", "alice-password")));
    assertThat(alice.body()).contains("\"user\":\"alice\"");
    assertThat(bob.body()).contains("\"user\":\"bob\"");
    assertThat(bob.headers().firstValue("Idempotent-Replayed")).isEmpty(); // not alice's answer
    assertThat(aliceAgain.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(aliceAgain.body()).isEqualTo(alice.body());
    assertThat(runsOf("/secure/pay")).isEqualTo(2);

    // Without a principal, the scope header names the caller.
    String k2 = newKey();
    HttpResponse<String> t1 = send(post("/tenant", k2, "p"));
    HttpResponse<String> t2 = send(post("/tenant", k2, "p").setHeader("X-Tenant", "t2"));
    assertThat(t2.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(t2.body()).isNotEqualTo(t1.body());
    assertThat(runsOf("/tenant")).isEqualTo(2);

    // Neither: 400, never a key shared by everyone.
    HttpRequest.Builder anonymous =
        HttpRequest.newBuilder(jetty.uri("/tenant"))
            .header("Idempotency-Key", k2)
            .POST(HttpRequest.BodyPublishers.ofString("p"));
    assertProblem(send(anonymous), 400, "scope-missing");
    assertThat(runsOf("/tenant")).isEqualTo(2);
  }

  @Test
  void aScopeHeaderSpellingTheDigestOfAnotherCallersLongScopeIsAnotherCaller() throws Exception {
    String longTenant = "tenant-" + "x".repeat(300);
    // What the filter once wrote for a scope too long to keep: the prefix, "sha256:" and the hex
    // of the value's SHA-256; a header of exactly that after the prefix fits and is kept as sent.
    String digestForm =
        "sha256:"
            + HexFormat.of()
                .formatHex(
                    MessageDigest.getInstance("SHA-256")
                        .digest(longTenant.getBytes(StandardCharsets.UTF_8)));
    String key = newKey();
    HttpResponse<String> a = send(post("/alias", key, "p").setHeader("X-Tenant", longTenant));
    HttpResponse<String> b = send(post("/alias", key, "p").setHeader("X-Tenant", digestForm));
    HttpResponse<String> aAgain = send(post("/alias", key, "p").setHeader("X-Tenant", longTenant));
    assertThat(a.statusCode()).isEqualTo(201);
    assertThat(b.statusCode()).isEqualTo(201);
    assertThat(b.headers().firstValue("Idempotent-Replayed")).isEmpty(); // not a's answer
    assertThat(b.body()).isNotEqualTo(a.body());
    assertThat(aAgain.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(aAgain.body()).isEqualTo(a.body());
    assertThat(runsOf("/alias")).isEqualTo(2);
  }

  @Test
  void aRequestCharsetUnknownOrIllegalIs415AndTakesNoKey() throws Exception {
    String[][] endpoints = {
      {"/charset/body", "text/plain"}, {"/charset/form", "application/x-www-form-urlencoded"}
    };
    List<String> keys = new ArrayList<>();
    for (String charset : new String[] {"bogus", "###"}) {
      for (String[] endpoint : endpoints) {
        String key = newKey();
        keys.add(key);
        HttpResponse<String> r =
            send(
                post(endpoint[0], key, "a=1")
                    .header("Content-Type", endpoint[1] + "; charset=" + charset));
        assertProblem(r, 415, "charset-unsupported");
        assertThat(store.acquisitions(T1, key)).as(charset + " " + endpoint[0]).isZero();
      }
    }
    assertThat(runsOf("/charset/body")).isZero();
    assertThat(runsOf("/charset/form")).isZero();
    // With a charset known here, the same key runs: it was never taken.
    HttpResponse<String> fine =
        send(
            post("/charset/form", keys.get(0), "a=1")
                .header("Content-Type", "application/x-www-form-urlencoded; charset=UTF-8"));
    assertThat(fine.statusCode()).isEqualTo(201);
    assertThat(fine.headers().firstValue("Idempotent-Replayed")).isEmpty();
    assertThat(fine.body()).contains("\"form\":\"1\"");
    assertThat(runsOf("/charset/form")).isEqualTo(1);
  }

  @Test
  void aResponseCharsetUnknownHereIsWrittenAsIso88591StoredAndReplayed() throws Exception {
    String key = newKey();
    HttpResponse<String> first = send(post("/response-charset", key, "r"));
    HttpResponse<String> again = send(post("/response-charset", key, "r"));
    assertThat(first.statusCode()).as(first.body()).isEqualTo(201);
    assertThat(first.body()).isEqualTo("run 1, caf\u00e9");
    assertThat(first.headers().firstValue("Content-Type"))
        .hasValueSatisfying(v -> assertThat(v.toLowerCase(Locale.ROOT)).endsWith("iso-8859-1"));
    assertThat(again.statusCode()).isEqualTo(201);
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(again.body()).isEqualTo(first.body());
    assertThat(runsOf("/response-charset")).isEqualTo(1);
  }

  @Test
  void a5xxReleasesTheKeySoThatARetryRunsAgain() throws Exception {
    flakyFailuresLeft.set(1);
    String key = newKey();
    HttpResponse<String> failed = send(post("/flaky", key, "f"));
    assertThat(failed.statusCode()).isEqualTo(503);
    assertThat(failed.body()).isEqualTo("bank unreachable, run 1");
    HttpResponse<String> retried = send(post("/flaky", key, "f"));
    assertThat(retried.statusCode()).isEqualTo(201);
    assertThat(retried.headers().firstValue("Idempotent-Replayed")).isEmpty();
    HttpResponse<String> replay = send(post("/flaky", key, "f"));
    assertThat(replay.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(replay.body()).isEqualTo(retried.body());
    assertThat(runsOf("/flaky")).isEqualTo(2);
  }

  @Test
  void whereConfiguredA5xxIsStoredAndReplayed() throws Exception {
    flakyFailuresLeft.set(1);
    String key = newKey();
    HttpResponse<String> failed = send(post("/stored5xx", key, "s"));
    HttpResponse<String> replay = send(post("/stored5xx", key, "s"));
    assertThat(failed.statusCode()).isEqualTo(503);
    assertThat(replay.statusCode()).isEqualTo(503);
    assertThat(replay.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(replay.body()).isEqualTo(failed.body());
    assertThat(replay.headers().firstValue("Content-Type").orElseThrow())
        .isEqualTo(failed.headers().firstValue("Content-Type").orElseThrow())
        .startsWith("text/plain");
    assertThat(runsOf("/stored5xx")).isEqualTo(1);
  }

  @Test
  void anOversizeBodyIs413WithOrWithoutContentLength() throws Exception {
    String big = "x".repeat(4097);
    assertProblem(send(post("/oversize", newKey(), big)), 413, "body-too-large");
    HttpRequest.Builder chunked =
        HttpRequest.newBuilder(jetty.uri("/oversize"))
            .header("X-Tenant", "t1")
            .header("Idempotency-Key", newKey())
            .POST(
                HttpRequest.BodyPublishers.ofInputStream(
                    () -> new ByteArrayInputStream(big.getBytes(StandardCharsets.UTF_8))));
    assertProblem(send(chunked), 413, "body-too-large");
    assertThat(runsOf("/oversize")).isZero();
    assertThat(send(post("/oversize", newKey(), "x".repeat(4096))).statusCode()).isEqualTo(201);
  }

  @Test
  void onlyCoveredMethodsAndEndpointsAreTouched() throws Exception {
    String key = newKey();
    for (int i = 0; i < 2; i++) {
      HttpResponse<String> put =
          send(
              HttpRequest.newBuilder(jetty.uri("/methods"))
                  .header("X-Tenant", "t1")
                  .header("Idempotency-Key", key)
                  .PUT(HttpRequest.BodyPublishers.ofString("m")));
      assertThat(put.headers().firstValue("Idempotent-Replayed")).isEmpty();
      HttpResponse<String> uncovered = send(post("/uncovered", key, "m"));
      assertThat(uncovered.headers().firstValue("Idempotent-Replayed")).isEmpty();
    }
    assertThat(runsOf("/methods")).isEqualTo(2);
    assertThat(runsOf("/uncovered")).isEqualTo(2);
    // PATCH is covered by default.
    HttpRequest.Builder patch =
        HttpRequest.newBuilder(jetty.uri("/patch"))
            .header("X-Tenant", "t1")
            .header("Idempotency-Key", key)
            .method("PATCH", HttpRequest.BodyPublishers.ofString("m"));
    send(patch);
    assertThat(send(patch).headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(runsOf("/patch")).isEqualTo(1);
  }

  @Test
  void formParametersReachTheHandlerAfterTheFilterReadTheBody() throws Exception {
    HttpResponse<String> r =
        send(
            post("/form", newKey(), "a=from+body&b=2")
                .header("Content-Type", "application/x-www-form-urlencoded"));
    assertThat(r.body()).contains("\"form\":\"from body\"");
    HttpResponse<String> query =
        send(
            post("/form?a=query", newKey(), "a=body")
                .header("Content-Type", "application/x-www-form-urlencoded"));
    assertThat(query.body()).contains("\"form\":\"query\""); // the query's value comes first
  }

  @Test
  void aSendErrorIsAProblemStoredAndReplayedAlike() throws Exception {
    String key = newKey();
    HttpResponse<String> first = send(post("/declined", key, "d"));
    HttpResponse<String> again = send(post("/declined", key, "d"));
    assertProblem(first, 402, "handler-error");
    assertThat(member(first.body(), "title")).isEqualTo("Payment Required");
    assertThat(first.body()).contains("card declined, run 1");
    assertThat(again.body()).isEqualTo(first.body());
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(runsOf("/declined")).isEqualTo(1);
  }

  @Test
  void aResponseTooLargeToStoreIsSentOnceAndItsReplaysSay409() throws Exception {
    String key = newKey();
    HttpResponse<byte[]> first =
        http.send(post("/big", key, "b").build(), HttpResponse.BodyHandlers.ofByteArray());
    assertThat(first.statusCode()).isEqualTo(200);
    assertThat(first.body()).hasSizeGreaterThan(10_000);
    HttpResponse<String> again = send(post("/big", key, "b"));
    assertProblem(again, 409, "response-not-stored");
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(runsOf("/big")).isEqualTo(1);
  }

  @Test
  void aHandlersEffectLandsWithTheStoredResponseOnce() throws Exception {
    String account = "acct-" + UUID.randomUUID();
    client.put("balance/" + account, "100");
    String key = newKey();
    for (int i = 0; i < 3; i++) {
      assertThat(send(post("/effect", key, account)).statusCode()).isEqualTo(201);
    }
    assertThat(client.get("balance/" + account).orElseThrow().valueAsString()).isEqualTo("90");
    assertThat(runsOf("/effect")).isEqualTo(1);
    // A refused effect (a counter that is not a number) applies nothing: 409, and the key is free.
    client.put("balance/broken", "not a number");
    String k2 = newKey();
    assertProblem(send(post("/effect", k2, "broken")), 409, "effect-refused");
    assertThat(client.getKey(T1, unquote(k2))).isEmpty();
  }

  /** The scope of the requests that {@link #post} makes: {@code X-Tenant: t1}. */
  static final String T1 = new CallerScope(CallerScope.Source.HEADER, "t1").encoded();

  static String unquote(String sfString) {
    return sfString.substring(1, sfString.length() - 1);
  }

  @Test
  void anUnreachableStoreIs503AndNothingRuns() throws Exception {
    String nobody = "127.0.0.1:" + LocalCluster.freePort();
    try (IdemClient lost =
            IdemClient.builder().servers(nobody).requestTimeout(Duration.ofMillis(500)).build();
        IdempotencyFilter down =
            IdempotencyFilter.builder(IdemKeyStore.over(lost))
                .anonymousScope("everyone-here")
                .storeTimeout(Duration.ofSeconds(2))
                .build();
        EmbeddedJetty other = EmbeddedJetty.start(down, Map.of("/*", new Scripted()), Map.of())) {
      HttpResponse<String> r =
          http.send(
              HttpRequest.newBuilder(other.uri("/down"))
                  .header("Idempotency-Key", newKey())
                  .POST(HttpRequest.BodyPublishers.ofString("d"))
                  .build(),
              HttpResponse.BodyHandlers.ofString());
      assertProblem(r, 503, "store-unavailable");
      assertThat(r.headers().firstValue("Retry-After")).hasValue("1");
    }
    assertThat(runsOf("/down")).isZero();
  }

  @Test
  void aKeyWhoseAcquireAnsweredAfterA503IsFreedWhenTheAnswerComes() throws Exception {
    // The store answers late (a slow network, a paused server): the filter gives up with a 503
    // while the acquire still lands. When its answer comes, the key is released, so a retry runs
    // at once instead of being told for the whole in-progress timeout that it is in progress.
    try (FaultProxy slow = FaultProxy.start(cluster.clientAddress(0));
        IdemClient late =
            IdemClient.builder()
                .servers(slow.address())
                .requestTimeout(Duration.ofSeconds(20))
                .build();
        IdempotencyFilter impatient =
            IdempotencyFilter.builder(IdemKeyStore.over(late))
                .anonymousScope("late-answers")
                .storeTimeout(Duration.ofMillis(500))
                .build();
        EmbeddedJetty other =
            EmbeddedJetty.start(impatient, Map.of("/*", new Scripted()), Map.of())) {
      String key = newKey();
      late.put("warm-up", "1"); // the session is open before the network slows down
      slow.delay(Duration.ofMillis(1500));
      HttpRequest request =
          HttpRequest.newBuilder(other.uri("/late"))
              .header("Idempotency-Key", key)
              .POST(HttpRequest.BodyPublishers.ofString("l"))
              .build();
      HttpResponse<String> first = http.send(request, HttpResponse.BodyHandlers.ofString());
      assertProblem(first, 503, "store-unavailable");
      slow.delay(Duration.ZERO);
      long until = System.nanoTime() + Duration.ofSeconds(15).toNanos();
      HttpResponse<String> retry = http.send(request, HttpResponse.BodyHandlers.ofString());
      // 503 while the slowed chunks still drain; never 409 for the whole in-progress timeout.
      while ((retry.statusCode() == 409 || retry.statusCode() == 503)
          && System.nanoTime() < until) {
        Thread.sleep(200);
        retry = http.send(request, HttpResponse.BodyHandlers.ofString());
      }
      assertThat(retry.statusCode()).as(retry.body()).isEqualTo(201);
    }
    assertThat(runsOf("/late")).isEqualTo(1);
  }

  @Test
  void aKeyOverTheQuotaIs429AndAFullStoreIs507AndNothingRuns() throws Exception {
    try (RawSession admin = new RawSession(cluster.clientAddress(0))) {
      // With auth off every client is one principal, which already holds more than 1 key.
      configure(
          admin, ConfigureRequest.newBuilder().setQuotas(Quotas.newBuilder().setKeyRecords(1)));
      try {
        assertProblem(send(post("/quota", newKey(), "q")), 429, "key-quota-exceeded");
      } finally {
        configure(
            admin,
            ConfigureRequest.newBuilder().setQuotas(Quotas.newBuilder().setKeyRecords(1_000_000)));
      }
      // The smallest backend budget, 1 MiB, under two values of 600 KB: the NO_SPACE alarm.
      byte[] big = new byte[600 * 1024];
      client.put("filler/1", big);
      client.put("filler/2", big);
      configure(admin, ConfigureRequest.newBuilder().setBackendBytes(1L << 20));
      try {
        assertProblem(send(post("/full", newKey(), "f")), 507, "store-full");
      } finally {
        client.delete("filler/1");
        client.delete("filler/2");
        configure(admin, ConfigureRequest.newBuilder().setBackendBytes(1L << 30));
      }
    }
    assertThat(runsOf("/quota")).isZero();
    assertThat(runsOf("/full")).isZero();
    assertThat(send(post("/quota", newKey(), "q")).statusCode()).isEqualTo(201);
  }

  private static void configure(RawSession admin, ConfigureRequest.Builder change) {
    assertThat(admin.configure(change.build()).getCode()).isEqualTo(Code.OK);
  }

  @Test
  void aRunWhoseKeyAnotherOwnerCompletedGetsTheStoredResponseAsAReplay() throws Exception {
    String key = newKey();
    for (int i = 0; i < 2; i++) {
      HttpResponse<String> r = send(post("/overtaken", key, "o"));
      assertThat(r.statusCode()).isEqualTo(200);
      assertThat(r.body()).isEqualTo("finished by the other owner");
      assertThat(r.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    }
    assertThat(runsOf("/overtaken")).isEqualTo(1);
  }

  @Test
  void anEffectNotOfTheStoresTypeFailsTheHandlersCallAndNothingIsStored() throws Exception {
    String key = newKey();
    HttpResponse<String> r = send(post("/wrong-effect", key, "w"));
    assertThat(r.statusCode()).isEqualTo(500);
    assertThat(client.getKey(T1, unquote(key))).as("the key was released").isEmpty();
    assertThat(runsOf("/wrong-effect")).isEqualTo(1);
  }

  @Test
  void everyProblemNameHasItsPageAndTheListNamesThemAll() throws Exception {
    HttpResponse<String> list =
        http.send(
            HttpRequest.newBuilder(jetty.uri(ProblemTypes.DEFAULT_PATH)).build(),
            BodyHandlers.ofString());
    assertThat(list.statusCode()).isEqualTo(200);
    for (ProblemType p : ProblemType.values()) {
      assertThat(p.documentation()).as(p.id() + ".html").isNotBlank().contains("What to do");
      URI uri = jetty.uri(ProblemTypes.DEFAULT_PATH + p.id());
      HttpResponse<String> page =
          http.send(HttpRequest.newBuilder(uri).build(), BodyHandlers.ofString());
      assertThat(page.statusCode()).as(uri.toString()).isEqualTo(200);
      assertThat(page.headers().firstValue("Content-Type").orElseThrow()).startsWith("text/html");
      assertThat(page.body())
          .contains("<h1>" + p.title() + "</h1>")
          .contains("<code>" + uri + "</code>")
          .contains(p.documentation());
      HttpResponse<Void> head =
          http.send(
              HttpRequest.newBuilder(uri)
                  .method("HEAD", HttpRequest.BodyPublishers.noBody())
                  .build(),
              BodyHandlers.discarding());
      assertThat(head.statusCode()).isEqualTo(200);
      assertThat(list.body()).contains("<a href=\"" + p.id() + "\">");
    }
    // Not one of the filter's names: the application answers (here the scripted servlet, 201).
    HttpResponse<String> other =
        http.send(
            HttpRequest.newBuilder(jetty.uri(ProblemTypes.DEFAULT_PATH + "no-such-problem"))
                .build(),
            BodyHandlers.ofString());
    assertThat(other.statusCode()).isEqualTo(201);
  }

  @Test
  void theOperatorsBaseIsTheTypeOfEveryProblemAndTheFilterServesNoPage() throws Exception {
    String base = "https://docs.example.com/api/errors#";
    try (IdempotencyFilter linked =
            IdempotencyFilter.builder(store)
                .scopeHeader("X-Tenant")
                .maxBodyBytes(4096)
                .maxResponseBytes(8192)
                .policyResolver(IdempotencyFilterTest::policy)
                .problemTypes(ProblemTypes.documentedAt(URI.create(base)))
                .build();
        EmbeddedJetty other = EmbeddedJetty.start(linked, Map.of("/*", new Scripted()), Map.of())) {
      java.util.function.Function<String, HttpRequest.Builder> at =
          path ->
              HttpRequest.newBuilder(other.uri(path))
                  .timeout(Duration.ofSeconds(60))
                  .header("X-Tenant", "t1");
      String reused = newKey();
      send(at.apply("/linked/reuse").header("Idempotency-Key", reused).POST(body("a")));
      String big = newKey();
      send(at.apply("/big/linked").header("Idempotency-Key", big).POST(body("b")));
      Map<String, HttpRequest.Builder> cases = new LinkedHashMap<>();
      cases.put("key-missing", at.apply("/required/linked").POST(body("x")));
      cases.put(
          "key-malformed", at.apply("/linked").header("Idempotency-Key", "bare").POST(body("x")));
      cases.put(
          "scope-missing",
          HttpRequest.newBuilder(other.uri("/linked"))
              .header("Idempotency-Key", newKey())
              .POST(body("x")));
      cases.put(
          "charset-unsupported",
          at.apply("/linked")
              .header("Idempotency-Key", newKey())
              .header("Content-Type", "text/plain; charset=bogus")
              .POST(body("x")));
      cases.put(
          "body-too-large",
          at.apply("/linked").header("Idempotency-Key", newKey()).POST(body("x".repeat(5000))));
      cases.put(
          "key-reused",
          at.apply("/linked/reuse").header("Idempotency-Key", reused).POST(body("other")));
      cases.put(
          "handler-error",
          at.apply("/declined/linked").header("Idempotency-Key", newKey()).POST(body("d")));
      cases.put(
          "response-not-stored",
          at.apply("/big/linked").header("Idempotency-Key", big).POST(body("b")));
      for (Map.Entry<String, HttpRequest.Builder> c : cases.entrySet()) {
        HttpResponse<String> r;
        try {
          // A body refused unread may end its connection after the answer (Jetty closes a
          // connection whose request body it could not consume), and the shared client could
          // then reuse that connection for the next case: this case gets a client of its own.
          r =
              c.getKey().equals("body-too-large")
                  ? HttpClient.newHttpClient()
                      .send(c.getValue().build(), HttpResponse.BodyHandlers.ofString())
                  : send(c.getValue());
        } catch (java.io.IOException e) {
          throw new java.io.IOException("case " + c.getKey() + ": " + e.getMessage(), e);
        }
        assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
        assertThat(member(r.body(), "type")).as(r.body()).isEqualTo(base + c.getKey());
        assertThat(member(r.body(), "title")).isNotBlank();
        assertThat(member(r.body(), "instance")).isEqualTo(r.request().uri().getRawPath());
      }
      HttpResponse<String> page =
          http.send(
              HttpRequest.newBuilder(other.uri(ProblemTypes.DEFAULT_PATH + "key-reused")).build(),
              BodyHandlers.ofString());
      assertThat(page.headers().firstValue("Content-Type").orElseThrow())
          .as("the scripted servlet's answer, not a page of the filter")
          .startsWith("application/json");
    }
  }

  @Test
  void aConfiguredPathServesThePagesThere() throws Exception {
    try (IdempotencyFilter moved =
            IdempotencyFilter.builder(store)
                .anonymousScope("moved")
                .policy(IdempotencyPolicy.builder().keyRequired(true).build())
                .problemTypes(ProblemTypes.servedAt("/docs/errors/"))
                .build();
        EmbeddedJetty other = EmbeddedJetty.start(moved, Map.of("/*", new Scripted()), Map.of())) {
      HttpResponse<String> r = send(HttpRequest.newBuilder(other.uri("/moved")).POST(body("x")));
      assertThat(member(r.body(), "type"))
          .isEqualTo(other.uri("/docs/errors/key-missing").toString());
      HttpResponse<String> page =
          http.send(
              HttpRequest.newBuilder(other.uri("/docs/errors/key-missing")).build(),
              BodyHandlers.ofString());
      assertThat(page.statusCode()).isEqualTo(200);
      assertThat(page.body()).contains("<h1>Idempotency-Key missing</h1>");
    }
  }

  @Test
  void problemTypesRefuseAPathOrBaseThatCannotTakeAName() {
    for (String bad : new String[] {"problems", "/problems", "/../x/", "/a b/", "/", ""}) {
      org.assertj.core.api.Assertions.assertThatThrownBy(() -> ProblemTypes.servedAt(bad))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("got " + bad);
    }
    org.assertj.core.api.Assertions.assertThatThrownBy(
            () -> ProblemTypes.documentedAt(URI.create("/relative/")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("/relative/");
  }

  static HttpRequest.BodyPublisher body(String s) {
    return HttpRequest.BodyPublishers.ofString(s);
  }

  @Test
  void problemsCarryTheirInstance() throws Exception {
    HttpResponse<String> r = send(post("/required/here", null, "x"));
    assertThat(r.body()).contains("\"instance\":\"/required/here\"");
  }
}
