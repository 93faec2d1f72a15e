package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Completions that carry a {@link RedisEffect}: the current token applies the effect and the
 * completion together; a stale token, a completed, released or expired record apply nothing; a
 * resent completion applies its effect once; an effect Redis refuses, or one outside the namespace,
 * writes nothing.
 */
@Timeout(120)
class RedisEffectTest {
  static final Fingerprint FP = Fingerprint.of(utf8("pay 10"));
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration HOUR = Duration.ofHours(1);

  @TempDir static Path dir;
  static RedisServer server;
  static RedisKeyStore store;
  static RedisClient admin;
  static StatefulRedisConnection<String, String> connection;

  @BeforeAll
  static void start() {
    server = RedisServer.start(dir, RedisServer.Aof.OFF);
    store = RedisKeyStore.builder().uri(server.uri()).prefix("fx").build();
    admin = RedisClient.create(server.uri());
    connection = admin.connect();
  }

  @AfterAll
  static void stop() {
    connection.close();
    admin.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    store.close();
    server.close();
  }

  static RedisCommands<String, String> redis() {
    return connection.sync();
  }

  @Test
  void theExecutorsEffectRidesTheCompletionOnceAndAForeignEffectIsRefused() throws Exception {
    java.util.concurrent.atomic.AtomicInteger runs =
        new java.util.concurrent.atomic.AtomicInteger();
    try (var ex = io.idem.keys.IdempotentExecutor.builder(store).build()) {
      IdempotencyKey key = new IdempotencyKey("executor", "pay-1");
      for (int i = 0; i < 3; i++) {
        String answer =
            ex.execute(
                key,
                Fingerprint.none(),
                Duration.ZERO,
                io.idem.keys.IdempotentExecutor.Codec.utf8(),
                token -> {
                  runs.incrementAndGet();
                  return io.idem.keys.IdempotentExecutor.Outcome.withEffect(
                      "debited 30", RedisEffect.incrementBy("{fx}:executor-balance", -30));
                });
        assertThat(answer).isEqualTo("debited 30");
      }
      assertThat(runs).hasValue(1);
      assertThat(redis().get("{fx}:executor-balance")).isEqualTo("-30");
      // An effect of another type does not compile (below); forced through an unchecked cast, it is
      // refused before anything is sent, and the key is released.
      @SuppressWarnings("unchecked")
      var raw = (io.idem.keys.IdempotentExecutor<Object>) (io.idem.keys.IdempotentExecutor<?>) ex;
      IdempotencyKey other = new IdempotencyKey("executor", "pay-2");
      assertThatThrownBy(
              () ->
                  raw.execute(
                      other,
                      Fingerprint.none(),
                      Duration.ZERO,
                      io.idem.keys.IdempotentExecutor.Codec.utf8(),
                      token -> io.idem.keys.IdempotentExecutor.Outcome.withEffect("x", "not one")))
          .isInstanceOf(ClassCastException.class);
      assertThat(redis().exists("{fx}:k:8:executor:pay-2")).isZero();
    }
  }

  @Test
  void anOperationThatHandsAnotherStoresEffectToTheRedisStoreDoesNotCompile() throws Exception {
    String misfit =
        """
        import io.idem.keys.*;
        import io.idem.keys.redis.*;
        import java.time.Duration;

        class Misfit {
          static String run(RedisKeyStore store, IdempotencyKey key) throws Exception {
            try (var ex = IdempotentExecutor.builder(store).build()) {
              return ex.execute(key, Fingerprint.none(), Duration.ZERO,
                  IdempotentExecutor.Codec.utf8(),
                  token -> IdempotentExecutor.Outcome.withEffect("debited", EFFECT));
            }
          }
        }
        """;
    assertThat(compile(misfit.replace("EFFECT", "RedisEffect.incrementBy(\"{fx}:b\", -1)")))
        .as("the store's own effect compiles")
        .isEmpty();
    // A String stands for any other store's effect (an io.idem.client.Write, a Runnable...).
    assertThat(compile(misfit.replace("EFFECT", "\"INCRBY balance -1\"")))
        .as("another type of effect is a compile error")
        .anySatisfy(error -> assertThat(error).contains("incompatible"));
  }

  /** Compiles {@code source} against this test's class path; the errors, empty if it compiled. */
  private static java.util.List<String> compile(String source) throws java.io.IOException {
    javax.tools.JavaCompiler javac = javax.tools.ToolProvider.getSystemJavaCompiler();
    javax.tools.DiagnosticCollector<javax.tools.JavaFileObject> errors =
        new javax.tools.DiagnosticCollector<>();
    java.nio.file.Path out = java.nio.file.Files.createTempDirectory("misfit");
    try {
      javax.tools.JavaFileObject file =
          new javax.tools.SimpleJavaFileObject(
              java.net.URI.create("string:///Misfit.java"),
              javax.tools.JavaFileObject.Kind.SOURCE) {
            @Override
            public CharSequence getCharContent(boolean ignoreEncodingErrors) {
              return source;
            }
          };
      javac
          .getTask(
              null,
              null,
              errors,
              java.util.List.of(
                  "-classpath", System.getProperty("java.class.path"), "-d", out.toString()),
              null,
              java.util.List.of(file))
          .call();
      return errors.getDiagnostics().stream()
          .filter(d -> d.getKind() == javax.tools.Diagnostic.Kind.ERROR)
          .map(d -> d.getMessage(java.util.Locale.ROOT))
          .toList();
    } finally {
      try (var files = java.nio.file.Files.walk(out)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  @Test
  void theCurrentTokenAppliesEachKindOfEffectTogetherWithTheCompletion() {
    assertThat(store.hashTag()).isEqualTo("{fx}");
    Map<String, RedisEffect> effects =
        Map.of(
            "push", RedisEffect.push("{fx}:ledger", utf8("1:10")),
            "set", RedisEffect.set("{fx}:receipt", utf8("r-1")),
            "incr", RedisEffect.incrementBy("{fx}:balance", -10),
            "hset", RedisEffect.hashSet("{fx}:status", "pay-1", utf8("paid")));
    for (Map.Entry<String, RedisEffect> e : effects.entrySet()) {
      IdempotencyKey k = new IdempotencyKey("current", e.getKey());
      long token = acquired(k).token();
      assertThat(join(store.complete(k, token, utf8("done " + e.getKey()), e.getValue())))
          .isEqualTo(new Settlement.Done(0));
      assertThat(join(store.acquire(k, FP, LONG, HOUR)))
          .isEqualTo(new Acquisition.Completed(utf8("done " + e.getKey())));
    }
    assertThat(redis().lrange("{fx}:ledger", 0, -1)).containsExactly("1:10");
    assertThat(redis().get("{fx}:receipt")).isEqualTo("r-1");
    assertThat(redis().get("{fx}:balance")).isEqualTo("-10");
    assertThat(redis().hget("{fx}:status", "pay-1")).isEqualTo("paid");
    // The effect's key keeps no expiry of the record's: it is the caller's data.
    assertThat(redis().pttl("{fx}:ledger")).isEqualTo(-1L);
  }

  @Test
  void aStaleTokenAppliesNothingAfterATakeover() throws InterruptedException {
    IdempotencyKey k = new IdempotencyKey("stale", "taken-over");
    Acquisition.Acquired first =
        (Acquisition.Acquired) join(store.acquire(k, FP, Duration.ofMillis(50), HOUR));
    Acquisition.Acquired second = takeOver(k);
    assertThat(second.token()).isGreaterThan(first.token());
    for (RedisEffect fx : everyKind("{fx}:stale")) {
      assertThat(join(store.complete(k, first.token(), utf8("late"), fx)))
          .isEqualTo(new Settlement.Fenced(second.token()));
    }
    assertNothingAt("{fx}:stale");
    // The new owner's completion applies its effect; the stale one, tried again, still nothing.
    RedisEffect mine = RedisEffect.push("{fx}:stale:list", utf8("second"));
    assertThat(join(store.complete(k, second.token(), utf8("paid"), mine)))
        .isEqualTo(new Settlement.Done(0));
    assertThat(join(store.complete(k, first.token(), utf8("late"), mine)))
        .isEqualTo(new Settlement.Completed(utf8("paid")));
    assertThat(redis().lrange("{fx}:stale:list", 0, -1)).containsExactly("second");
  }

  @Test
  void aCompletedReleasedOrExpiredRecordAppliesNothing() throws InterruptedException {
    IdempotencyKey done = new IdempotencyKey("gone", "completed");
    long t1 = acquired(done).token();
    assertThat(join(store.complete(done, t1, utf8("paid")))).isEqualTo(new Settlement.Done(0));
    IdempotencyKey released = new IdempotencyKey("gone", "released");
    long t2 = acquired(released).token();
    assertThat(join(store.release(released, t2))).isEqualTo(new Settlement.Done(0));
    IdempotencyKey expired = new IdempotencyKey("gone", "expired");
    long t3 =
        ((Acquisition.Acquired)
                join(store.acquire(expired, FP, Duration.ofMillis(20), Duration.ofMillis(20))))
            .token();
    long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (redis().exists(new String(store.recordKey(expired), StandardCharsets.UTF_8)) > 0) {
      assertThat(System.nanoTime()).as("the record expires").isLessThan(until);
      Thread.sleep(10);
    }
    for (RedisEffect fx : everyKind("{fx}:gone")) {
      assertThat(join(store.complete(done, t1, utf8("other"), fx)))
          .isEqualTo(new Settlement.Completed(utf8("paid")));
      assertThat(join(store.complete(released, t2, utf8("x"), fx)))
          .isEqualTo(new Settlement.Fenced(0));
      assertThat(join(store.complete(expired, t3, utf8("x"), fx)))
          .isEqualTo(new Settlement.Fenced(0));
    }
    assertNothingAt("{fx}:gone");
  }

  @Test
  void aCompletionResentAfterALostAnswerAppliesItsEffectOnce() {
    IdempotencyKey k = new IdempotencyKey("resent", "once");
    long token = acquired(k).token();
    RedisEffect fx = RedisEffect.incrementBy("{fx}:resent:balance", 7);
    for (int i = 0; i < 3; i++) {
      assertThat(join(store.complete(k, token, utf8("paid 7"), fx)))
          .isEqualTo(new Settlement.Done(0));
    }
    assertThat(redis().get("{fx}:resent:balance")).isEqualTo("7");
    // Another response under the same token is not a resend: refused, nothing applied.
    assertThat(join(store.complete(k, token, utf8("paid 8"), fx)))
        .isEqualTo(new Settlement.Completed(utf8("paid 7")));
    assertThat(redis().get("{fx}:resent:balance")).isEqualTo("7");
  }

  @Test
  void anEffectRedisRefusesWritesNothingAndLeavesTheKeyToItsOwner() {
    redis().set("{fx}:refused:text", "not a list, not a number");
    IdempotencyKey k = new IdempotencyKey("refused", "wrongtype");
    Acquisition.Acquired a = acquired(k);
    for (RedisEffect fx :
        List.of(
            RedisEffect.push("{fx}:refused:text", utf8("x")),
            RedisEffect.incrementBy("{fx}:refused:text", 1),
            RedisEffect.hashSet("{fx}:refused:text", "f", utf8("x")))) {
      assertThatThrownBy(() -> join(store.complete(k, a.token(), utf8("paid"), fx)))
          .isInstanceOf(CompletionException.class)
          .cause()
          .isInstanceOfSatisfying(
              RedisEffectRefusedException.class,
              e -> {
                assertThat(e.effect()).isEqualTo(fx);
                assertThat(e.key()).isEqualTo(k);
                assertThat(e.getMessage()).containsAnyOf("WRONGTYPE", "not an integer");
              });
    }
    redis().set("{fx}:refused:max", Long.toString(Long.MAX_VALUE));
    assertThatThrownBy(
            () ->
                join(
                    store.complete(
                        k,
                        a.token(),
                        utf8("paid"),
                        RedisEffect.incrementBy("{fx}:refused:max", 1))))
        .cause()
        .isInstanceOf(RedisEffectRefusedException.class)
        .hasMessageContaining("overflow");
    assertThat(redis().get("{fx}:refused:text")).isEqualTo("not a list, not a number");
    assertThat(redis().get("{fx}:refused:max")).isEqualTo(Long.toString(Long.MAX_VALUE));
    // Still the owner's, in progress: it completes without the effect, or with one that applies.
    assertThat(join(store.acquire(k, FP, LONG, HOUR)))
        .isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
    assertThat(
            join(
                store.complete(
                    k, a.token(), utf8("paid"), RedisEffect.set("{fx}:refused:text", utf8("ok")))))
        .isEqualTo(new Settlement.Done(0));
    assertThat(redis().get("{fx}:refused:text")).isEqualTo("ok");
  }

  @Test
  void effectKeysOutsideTheNamespaceOrOnTheStoresOwnKeysAreRefusedBeforeAnythingIsSent() {
    IdempotencyKey k = new IdempotencyKey("bad", "keys");
    Acquisition.Acquired a = acquired(k);
    String record = new String(store.recordKey(k), StandardCharsets.UTF_8);
    for (String bad : List.of("ledger", "{other}:ledger", "fx:ledger", "{fx}:token", record)) {
      assertThatThrownBy(
              () -> join(store.complete(k, a.token(), utf8("p"), RedisEffect.set(bad, utf8("x")))))
          .cause()
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining(bad);
    }
    assertThatThrownBy(
            () ->
                join(
                    store.complete(
                        k,
                        a.token(),
                        utf8("p"),
                        RedisEffect.push("{fx}:big", new byte[64 * 1024 + 1]))))
        .cause()
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at most");
    assertThatThrownBy(() -> RedisEffect.push("{fx}:l", null))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(redis().exists("ledger", "{other}:ledger", "fx:ledger", "{fx}:big")).isZero();
    assertThat(join(store.show(k)).orElseThrow().completed()).isFalse();
    assertThat(join(store.acquire(k, FP, LONG, HOUR)))
        .isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
  }

  // ---- helpers ----

  private static List<RedisEffect> everyKind(String base) {
    return List.of(
        RedisEffect.push(base + ":list", utf8("x")),
        RedisEffect.set(base + ":string", utf8("x")),
        RedisEffect.incrementBy(base + ":counter", 1),
        RedisEffect.hashSet(base + ":hash", "f", utf8("x")));
  }

  private static void assertNothingAt(String base) {
    assertThat(redis().keys(base.replace("{", "\\{").replace("}", "\\}") + ":*")).isEmpty();
  }

  private static Acquisition.Acquired acquired(IdempotencyKey k) {
    return (Acquisition.Acquired) join(store.acquire(k, FP, LONG, HOUR));
  }

  /** Acquires {@code k} once its owner's deadline passed on the server's clock (bounded). */
  private static Acquisition.Acquired takeOver(IdempotencyKey k) throws InterruptedException {
    long until = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (true) {
      Acquisition a = join(store.acquire(k, FP, LONG, HOUR));
      if (a instanceof Acquisition.Acquired got) {
        return got;
      }
      assertThat(System.nanoTime()).as("a takeover after the deadline").isLessThan(until);
      Thread.sleep(10);
    }
  }

  private static <T> T join(CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
