package io.idem.http;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.http.CallerScope.Source;
import io.idem.keys.IdempotencyKey;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The scopes the filter writes for its callers: two callers never share one, whatever a caller
 * sends (the other's scope, any tail of it, a marker, a digest), on either side of the
 * 255-character bound.
 */
class CallerScopeTest {
  private static final int MAX = IdempotencyKey.MAX_CHARS;

  @Test
  void theScopesAreTheSourceTheFormAndTheValueOrItsDigest() {
    assertThat(new CallerScope(Source.HEADER, "t1").encoded()).isEqualTo("header:v:t1");
    assertThat(new CallerScope(Source.PRINCIPAL, "alice").encoded()).isEqualTo("principal:v:alice");
    assertThat(new CallerScope(Source.ANONYMOUS, "payments-example").encoded())
        .isEqualTo("anonymous:v:payments-example");
    assertThat(new CallerScope(Source.ANONYMOUS, "").encoded()).isEqualTo("anonymous:v:");
    String fits = "x".repeat(MAX - "header:v:".length());
    assertThat(new CallerScope(Source.HEADER, fits).encoded())
        .isEqualTo("header:v:" + fits)
        .hasSize(MAX);
    assertThat(new CallerScope(Source.HEADER, fits + "x").encoded())
        .matches("header:h:[0-9a-f]{64}");
    // A name the stores' UTF-8 could not keep apart from "a?b" is kept by its digest.
    assertThat(new CallerScope(Source.PRINCIPAL, "a\uD800b").encoded())
        .matches("principal:h:[0-9a-f]{64}");
  }

  @Test
  void distinctCallersAroundTheBoundAndTheMarkersHaveDistinctScopes() throws Exception {
    Set<String> values =
        new LinkedHashSet<>(
            List.of(
                "",
                "t1",
                ":",
                "v:",
                "h:",
                "v:t1",
                "h:t1",
                "sha256:",
                "a\uD800b",
                "a\uDC00b",
                "a?b",
                "a\uFFFDb",
                "a\uD83D\uDE00b"));
    for (Source s : Source.values()) {
      values.add(s.tag);
      values.add(s.tag + "v:t1");
      values.add(s.tag + "h:t1");
      // Just fitting, exactly fitting and just not fitting, for this source and for the others.
      for (int n = MAX - s.tag.length() - 4; n <= MAX - s.tag.length(); n++) {
        values.add("x".repeat(n));
        values.add("v:" + "x".repeat(n - 2));
        values.add("h:" + "x".repeat(n - 2));
      }
    }
    for (String v : List.copyOf(values)) {
      // The digests a caller could send in the hope of another's long scope: the one the filter
      // once wrote (prefix + "sha256:" + hex of the UTF-8) and hex of the chars (UTF-16).
      byte[] utf8 = MessageDigest.getInstance("SHA-256").digest(v.getBytes(StandardCharsets.UTF_8));
      ByteBuffer chars = ByteBuffer.allocate(2 * v.length());
      chars.asCharBuffer().put(v);
      byte[] utf16 = MessageDigest.getInstance("SHA-256").digest(chars.array());
      for (byte[] d : List.of(utf8, utf16)) {
        String hex = HexFormat.of().formatHex(d);
        values.add(hex);
        values.add("sha256:" + hex);
        values.add("h:" + hex);
      }
    }
    Map<String, CallerScope> owners = new HashMap<>();
    List<String> clashes = new ArrayList<>();
    for (Source s : Source.values()) {
      for (String v : values) {
        CallerScope caller = new CallerScope(s, v);
        String scope = caller.encoded();
        assertThat(scope.length()).as("scope of %s", caller).isLessThanOrEqualTo(MAX);
        CallerScope owner = owners.putIfAbsent(scope, caller);
        if (owner != null) {
          clashes.add(scope + " is the scope of " + owner + " and " + caller);
        }
      }
    }
    // And every tail of every one of these scopes, sent as a value of any source, is elsewhere.
    owners.forEach(
        (scope, caller) -> {
          for (int i = 0; i <= scope.length(); i++) {
            for (Source s : Source.values()) {
              CallerScope intruder = new CallerScope(s, scope.substring(i));
              if (!intruder.equals(caller) && intruder.encoded().equals(scope)) {
                clashes.add(scope + " is the scope of " + caller + " and " + intruder);
              }
            }
          }
        });
    assertThat(clashes).as("%d callers", owners.size()).isEmpty();
  }

  @Test
  void noValueOfAnySourceLandsInAnotherCallersScope() {
    long seed = System.nanoTime();
    Random random = new Random(seed);
    Source[] sources = Source.values();
    for (int i = 0; i < 2000; i++) {
      CallerScope caller = new CallerScope(sources[random.nextInt(3)], value(random));
      String scope = caller.encoded();
      assertThat(scope.length()).as("seed %d: scope of %s", seed, caller).isLessThanOrEqualTo(MAX);
      // The values an intruder would try: the scope, and every tail of it.
      for (int from = 0; from <= scope.length(); from++) {
        for (Source other : sources) {
          CallerScope intruder = new CallerScope(other, scope.substring(from));
          if (!intruder.equals(caller)) {
            assertThat(intruder.encoded())
                .as("seed %d: scope of %s and of %s", seed, intruder, caller)
                .isNotEqualTo(scope);
          }
        }
      }
      // The stores keep scopes as UTF-8: a scope that survives the round trip is not merged there
      // with another.
      assertThat(new String(scope.getBytes(StandardCharsets.UTF_8), StandardCharsets.UTF_8))
          .as("seed %d: scope of %s in UTF-8", seed, caller)
          .isEqualTo(scope);
    }
  }

  private static final List<String> STARTS =
      List.of(
          "",
          "",
          "",
          "v:",
          "h:",
          "sha256:",
          ":",
          "principal:",
          "header:",
          "anonymous:",
          "header:v:",
          "header:h:");

  private static final String CHARS = "xvh:0af\u00e9?\uD800\uDC00";

  /** A short or near-the-bound value, often starting with a tag or a marker. */
  private static String value(Random random) {
    StringBuilder b = new StringBuilder(STARTS.get(random.nextInt(STARTS.size())));
    int n = random.nextBoolean() ? random.nextInt(13) : 228 + random.nextInt(35);
    for (int i = 0; i < n; i++) {
      b.append(CHARS.charAt(random.nextInt(CHARS.length())));
    }
    return b.toString();
  }
}
