package io.idem.examples.payments;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.LocalCluster;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The payments service's answers over real HTTP, on the Idem store (a real one-node cluster): the
 * withdrawal's {@code Location} for keys that need percent-encoding, and the problems a client must
 * tell apart (the service's own and the filter's), each with type, title, status, detail and
 * instance, and a type that leads to its documentation.
 */
@Timeout(120)
class PaymentsServiceHttpTest {
  static final long OPENING = 1_000;

  @TempDir static Path dir;
  static LocalCluster cluster;
  static IdemClient client;
  static PaymentsService service;
  static URI base;
  static final HttpClient http = HttpClient.newHttpClient();

  @BeforeAll
  static void start() throws Exception {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
    client = IdemClient.builder().servers(cluster.clientAddresses()).build();
    PaymentsService.openAccount(client, "alice", OPENING);
    service = PaymentsService.start(client, PaymentsService.Options.defaults());
    base = URI.create("http://127.0.0.1:" + service.port());
  }

  @AfterAll
  static void stop() throws Exception {
    service.close();
    client.close();
    cluster.close();
  }

  static HttpResponse<String> withdraw(String account, String sfKey, String body) throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(base.resolve("/accounts/" + account + "/withdrawals"))
            .timeout(Duration.ofSeconds(30))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (sfKey != null) {
      b.header("Idempotency-Key", sfKey);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static HttpResponse<String> get(URI uri) throws Exception {
    return http.send(
        HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  /** {@code key} as an RFC 8941 string: quoted, with {@code \} and {@code "} escaped. */
  static String sf(String key) {
    return "\"" + key.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  @Test
  void theLocationOfAWithdrawalIsAValidUriWhoseGetAnswersItWhateverItsKeyHolds() throws Exception {
    String tag = UUID.randomUUID().toString().substring(0, 8);
    for (String key :
        new String[] {
          "w " + tag + " \"quoted\"", "a/b-" + tag, "100%-" + tag, "q?x=1#f-" + tag, "..", "."
        }) {
      HttpResponse<String> created = withdraw("alice", sf(key), "{\"amount\":1}");
      assertThat(created.statusCode()).as(key + ": " + created.body()).isEqualTo(201);
      String location = created.headers().firstValue("Location").orElseThrow();
      // A URI reference (RFC 3986): no space, no quote; this throws on anything else.
      URI target = base.resolve(new URI(location));
      assertThat(location).as(key).startsWith("/accounts/alice/withdrawals/");
      assertThat(target.getRawPath()).as("no dot segment removed").isEqualTo(location);

      HttpResponse<String> read = get(target);
      assertThat(read.statusCode()).as(key + " at " + location + ": " + read.body()).isEqualTo(200);
      assertThat(read.body()).isEqualTo(created.body());
      assertThat(jsonString(read.body(), "withdrawal")).as("decodes back").isEqualTo(key);
    }
  }

  @Test
  void aWithdrawalThatWasNotMadeIsNotFound() throws Exception {
    assertProblem(
        get(base.resolve("/accounts/alice/withdrawals/never-made-" + UUID.randomUUID())),
        404,
        "/problems/payments/no-such-withdrawal");
    // Made from another account: not this account's withdrawal.
    String key = "from-alice-" + UUID.randomUUID();
    PaymentsService.openAccount(client, "bob", OPENING);
    assertThat(withdraw("alice", sf(key), "{\"amount\":1}").statusCode()).isEqualTo(201);
    assertProblem(
        get(base.resolve("/accounts/bob/withdrawals/" + key)),
        404,
        "/problems/payments/no-such-withdrawal");
  }

  @Test
  void insufficientFundsIs402AProblemNoFilterAnswerShares() throws Exception {
    String key = sf("too-much-" + UUID.randomUUID());
    HttpResponse<String> r = withdraw("alice", key, "{\"amount\":" + (OPENING * 10) + "}");
    assertProblem(r, 402, "/problems/payments/insufficient-funds");
    assertThat(jsonString(r.body(), "detail")).contains("balance").contains("" + OPENING * 10);
    // Stored like any answer: the retry gets it again, and the filter's own answers differ.
    HttpResponse<String> again = withdraw("alice", key, "{\"amount\":" + (OPENING * 10) + "}");
    assertThat(again.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(again.body()).isEqualTo(r.body());
    assertProblem(
        withdraw("alice", key, "{\"amount\":1}"), 422, "/problems/idempotency/key-reused");
  }

  @Test
  void everyProblemOfTheServiceAndItsFilterHasTitleInstanceAndADocumentedType() throws Exception {
    assertProblem(
        withdraw("alice", sf(UUID.randomUUID().toString()), "{\"amount\":0}"),
        400,
        "/problems/payments/bad-withdrawal");
    assertProblem(
        withdraw("nobody", sf(UUID.randomUUID().toString()), "{\"amount\":1}"),
        404,
        "/problems/payments/no-such-account");
    assertProblem(get(base.resolve("/accounts/nobody")), 404, "/problems/payments/no-such-account");
    assertProblem(get(base.resolve("/accounts/alice/else")), 404, "/problems/payments/not-found");
    assertProblem(
        withdraw("alice", null, "{\"amount\":1}"), 400, "/problems/idempotency/key-missing");
    assertProblem(
        withdraw("alice", "unquoted", "{\"amount\":1}"),
        400,
        "/problems/idempotency/key-malformed");
  }

  /**
   * {@code r} is an RFC 9457 problem with {@code status}, a title, a detail, its path as instance,
   * and the type {@code typePath} on this service, whose page answers.
   */
  static void assertProblem(HttpResponse<String> r, int status, String typePath) throws Exception {
    assertThat(r.statusCode()).as(r.body()).isEqualTo(status);
    assertThat(r.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    String type = jsonString(r.body(), "type");
    assertThat(type).isEqualTo(base.resolve(typePath).toString());
    assertThat(r.body()).contains("\"status\":" + status);
    assertThat(jsonString(r.body(), "title")).isNotBlank();
    assertThat(jsonString(r.body(), "detail")).isNotBlank();
    assertThat(jsonString(r.body(), "instance")).isEqualTo(r.request().uri().getRawPath());
    HttpResponse<String> page = get(URI.create(type));
    assertThat(page.statusCode()).as(type).isEqualTo(200);
    assertThat(page.headers().firstValue("Content-Type").orElseThrow()).startsWith("text/html");
    assertThat(page.body()).contains("<h1>" + jsonString(r.body(), "title") + "</h1>");
  }

  /** The string member {@code name} of a flat JSON object, with its escapes undone. */
  static String jsonString(String json, String name) {
    Matcher m =
        Pattern.compile("\"" + Pattern.quote(name) + "\":\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
    assertThat(m.find()).as(name + " in " + json).isTrue();
    return m.group(1).replaceAll("\\\\(.)", "$1");
  }
}
