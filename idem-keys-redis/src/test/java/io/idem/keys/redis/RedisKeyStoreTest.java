package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyStoreContract;
import io.idem.keys.KeyStoreException;
import io.idem.keys.KeyStoreFullException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.codec.ByteArrayCodec;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store contract on a private redis-server, and what is Redis's own: the NOSCRIPT fallback, the
 * server's clock, the key layout, a killed server (never a yes), and tokens across a restart and
 * across the loss of every byte of data.
 */
class RedisKeyStoreTest extends KeyStoreContract {
  static final Duration LONG = Duration.ofMinutes(5);
  static final Duration HOUR = Duration.ofHours(1);
  static final Fingerprint FP = Fingerprint.of(utf8("amount=10"));

  @TempDir static Path dir;
  static RedisServer server;
  static RedisKeyStore store;
  static RedisServer gone;
  static RedisKeyStore lost;
  static RedisClient admin;
  static StatefulRedisConnection<String, String> adminConnection;
  static StatefulRedisConnection<byte[], byte[]> adminBytes;

  @BeforeAll
  static void start() {
    server = RedisServer.start(dir.resolve("main"), RedisServer.Aof.OFF);
    store = RedisKeyStore.builder().uri(server.uri()).prefix("contract").build();
    // A store whose server was killed after it connected: every call must fail, none say yes.
    gone = RedisServer.start(dir.resolve("gone"), RedisServer.Aof.OFF);
    lost = RedisKeyStore.builder().uri(gone.uri()).timeout(Duration.ofSeconds(2)).build();
    gone.kill();
    admin = RedisClient.create(server.uri());
    adminConnection = admin.connect();
    adminBytes = admin.connect(ByteArrayCodec.INSTANCE);
  }

  @AfterAll
  static void stop() {
    adminBytes.close();
    adminConnection.close();
    admin.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    lost.close();
    store.close();
    gone.close();
    server.close();
  }

  @Override
  protected KeyStore<?> store() {
    return store;
  }

  @Override
  protected KeyStore<?> unreachableStore() {
    return lost;
  }

  static RedisCommands<String, String> redis() {
    return adminConnection.sync();
  }

  @Test
  void afterTheScriptCacheIsFlushedEvalRunsTheScriptOnceAndCachesItAgain() {
    IdempotencyKey k = key("noscript");
    Acquisition.Acquired a =
        (Acquisition.Acquired) join(store.acquire(k, FP, LONG, HOUR)); // cached now
    assertThat(redis().scriptExists(KeyScript.TRANSITIONS.sha1())).containsExactly(true);
    redis().scriptFlush();
    assertThat(redis().scriptExists(KeyScript.TRANSITIONS.sha1())).containsExactly(false);
    assertThat(join(store.complete(k, a.token(), utf8("paid")))).isEqualTo(new Settlement.Done(0));
    assertThat(redis().scriptExists(KeyScript.TRANSITIONS.sha1())).containsExactly(true);
    assertThat(join(store.acquire(k, FP, LONG, HOUR)))
        .isEqualTo(new Acquisition.Completed(utf8("paid")));
    // Ran once: a second run of the same completion would be refused by the record, not done.
    assertThat(join(store.complete(k, a.token(), utf8("other"))))
        .isEqualTo(new Settlement.Completed(utf8("paid")));
  }

  @Test
  void deadlinesAndTokensComeFromTheServersClock() {
    List<String> time = redis().time();
    long serverMs = Long.parseLong(time.get(0)) * 1000 + Long.parseLong(time.get(1)) / 1000;
    long serverUs = Long.parseLong(time.get(0)) * 1_000_000 + Long.parseLong(time.get(1));
    Acquisition.Acquired a =
        (Acquisition.Acquired) join(store.acquire(key("clock"), FP, Duration.ofMinutes(2), HOUR));
    assertThat(a.deadlineMs() - serverMs).isBetween(120_000L, 125_000L);
    assertThat(a.token()).isGreaterThanOrEqualTo(serverUs);
  }

  @Test
  void everyKeyIsInTheNamespacesHashSlotAndOnlyTheCounterNeverExpires() {
    IdempotencyKey k = new IdempotencyKey("tenant:1", "order:9");
    Acquisition.Acquired a =
        (Acquisition.Acquired) join(store.acquire(k, FP, Duration.ofSeconds(10), HOUR));
    String record = new String(store.recordKey(k), StandardCharsets.UTF_8);
    assertThat(record).isEqualTo("{contract}:k:8:tenant:1:order:9");
    assertThat(redis().pttl(record)).isBetween(HOUR.toMillis(), HOUR.toMillis() + 10_000);
    assertThat(redis().type(record)).isEqualTo("string"); // a packed record (docs/KEYS.md)
    assertThat(join(store.show(k)).orElseThrow().token()).isEqualTo(a.token());
    assertThat(redis().pttl("{contract}:token")).isEqualTo(-1L);
    assertThat(Long.parseLong(redis().get("{contract}:token"))).isGreaterThanOrEqualTo(a.token());
    assertThat(join(store.complete(k, a.token(), utf8("x")))).isEqualTo(new Settlement.Done(0));
    assertThat(redis().pttl(record)).isBetween(HOUR.toMillis() - 10_000, HOUR.toMillis());
    // Every key any store of these tests wrote: a hash tag, then a record or a counter; only the
    // counters never expire.
    for (String name : redis().keys("*")) {
      assertThat(name).matches("(?s)\\{[^{}]+\\}:(token|k:[0-9]+:.*)");
      if (name.endsWith("}:token")) {
        assertThat(redis().pttl(name)).as(name).isEqualTo(-1L);
      } else {
        assertThat(redis().pttl(name)).as(name).isPositive();
      }
    }
  }

  @Test
  void anAcquireOrACompletionResentAfterALostAnswerAnswersAsTheFirstDid() {
    IdempotencyKey k = key("resent");
    List<Object> first = join(runAlone(acquireCall(k, "attempt-1")));
    List<Object> again = join(runAlone(acquireCall(k, "attempt-1")));
    assertThat(text(again)).isEqualTo(text(first)).startsWith("A ");
    assertThat(text(join(runAlone(acquireCall(k, "attempt-2"))))).startsWith("P ");
    long token = Long.parseLong(text(first).split(" ")[1]);
    assertThat(join(store.complete(k, token, utf8("r")))).isEqualTo(new Settlement.Done(0));
    assertThat(join(store.complete(k, token, utf8("r")))).isEqualTo(new Settlement.Done(0));
    assertThat(join(store.complete(k, token, utf8("s"))))
        .isEqualTo(new Settlement.Completed(utf8("r")));
  }

  @Test
  void aKilledServerIsNeverAYesAndAfterItsRestartTheKeyIsWhereItWas() throws Exception {
    try (RedisServer own = RedisServer.start(dir.resolve("killed"), RedisServer.Aof.ALWAYS);
        RedisKeyStore s =
            RedisKeyStore.builder().uri(own.uri()).timeout(Duration.ofSeconds(2)).build();
        var ex = IdempotentExecutor.builder(s).build()) {
      IdempotencyKey held = key("held");
      Acquisition.Acquired a = (Acquisition.Acquired) join(s.acquire(held, FP, LONG, HOUR));
      own.kill();
      IdempotencyKey fresh = key("fresh");
      assertThatThrownBy(() -> join(s.acquire(fresh, FP, LONG, HOUR)))
          .isInstanceOf(CompletionException.class)
          .hasCauseInstanceOf(KeyStoreException.class);
      assertThatThrownBy(() -> join(s.complete(held, a.token(), utf8("x"))))
          .hasCauseInstanceOf(KeyStoreException.class);
      AtomicInteger runs = new AtomicInteger();
      assertThatThrownBy(
              () ->
                  ex.execute(
                      fresh, FP, IdempotentExecutor.Codec.utf8(), t -> "" + runs.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
      assertThat(runs).hasValue(0);

      own.restart();
      Acquisition again = awaitAnswer(s, held);
      assertThat(again).isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
      Acquisition.Acquired b = (Acquisition.Acquired) join(s.acquire(fresh, FP, LONG, HOUR));
      assertThat(b.token()).isGreaterThan(a.token());
      assertThat(ex.execute(key("after"), FP, IdempotentExecutor.Codec.utf8(), t -> "ran"))
          .isEqualTo("ran");
    }
  }

  @Test
  void aServerAtItsMaxmemoryRefusesAKeyAsFullWritingNothing() throws Exception {
    IdempotencyKey k = key("oom");
    AtomicInteger runs = new AtomicInteger();
    redis().configSet("maxmemory", "1"); // below what it uses: every write is refused (noeviction)
    try {
      assertThatThrownBy(() -> join(store.acquire(k, FP, LONG, HOUR)))
          .isInstanceOf(CompletionException.class)
          .cause()
          .isInstanceOfSatisfying(KeyStoreFullException.class, e -> assertThat(e.quota()).isFalse())
          .hasMessageContaining("maxmemory");
      try (var ex = IdempotentExecutor.builder(store).build()) {
        assertThatThrownBy(
                () ->
                    ex.execute(
                        k,
                        FP,
                        IdempotentExecutor.Codec.utf8(),
                        t -> "ran " + runs.incrementAndGet()))
            .isInstanceOf(KeyStoreFullException.class);
      }
    } finally {
      redis().configSet("maxmemory", "0");
    }
    assertThat(runs).hasValue(0);
    assertThat(join(store.acquire(k, FP, LONG, HOUR))).isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void anAcquireThatTimedOutWhileRedisWasStoppedIsReleasedOnceRedisAnswers() throws Exception {
    // Redis stops (SIGSTOP: a long GC-like pause, a frozen VM) with an acquire in flight. The
    // caller
    // gets KeyStoreException; the script runs when Redis resumes and the key would stay held by
    // nobody for the whole in-progress timeout. The store resends the attempt and releases it.
    try (RedisServer own = RedisServer.start(dir.resolve("stopped"), RedisServer.Aof.OFF);
        RedisKeyStore s =
            RedisKeyStore.builder().uri(own.uri()).timeout(Duration.ofMillis(500)).build()) {
      IdempotencyKey k = key("stopped");
      Duration inProgress = Duration.ofSeconds(60);
      // Redis has the script cached, so the acquire in flight is one EVALSHA that runs on resume.
      assertThat(join(s.acquire(key("warm-up"), FP, inProgress, HOUR)))
          .isInstanceOf(Acquisition.Acquired.class);
      signal("STOP", own.pid());
      try {
        assertThatThrownBy(() -> join(s.acquire(k, FP, inProgress, HOUR)))
            .isInstanceOf(CompletionException.class)
            .hasCauseInstanceOf(KeyStoreException.class);
      } finally {
        signal("CONT", own.pid());
      }
      long until = System.nanoTime() + Duration.ofSeconds(20).toNanos(); // a third of 60 s
      Acquisition a = join(s.acquire(k, FP, inProgress, HOUR));
      while (a instanceof Acquisition.InProgress && System.nanoTime() < until) {
        Thread.sleep(100);
        a = join(s.acquire(k, FP, inProgress, HOUR));
      }
      assertThat(a)
          .as("the key is free long before its in-progress timeout")
          .isInstanceOf(Acquisition.Acquired.class);
    }
  }

  private static void signal(String name, long pid) throws Exception {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(pid)).inheritIO().start();
    assertThat(kill.waitFor(10, TimeUnit.SECONDS)).isTrue();
    assertThat(kill.exitValue()).isZero();
  }

  @Test
  void tokensKeepGrowingWhenEveryByteOfDataIsLost() throws Exception {
    Path data = dir.resolve("wiped");
    long before;
    try (RedisServer own = RedisServer.start(data, RedisServer.Aof.ALWAYS);
        RedisKeyStore s = RedisKeyStore.builder().uri(own.uri()).build()) {
      Acquisition.Acquired a = (Acquisition.Acquired) join(s.acquire(key("w"), FP, LONG, HOUR));
      before = a.token();
    }
    deleteRecursively(data);
    try (RedisServer own = RedisServer.start(data, RedisServer.Aof.ALWAYS);
        RedisKeyStore s = RedisKeyStore.builder().uri(own.uri()).build()) {
      Acquisition.Acquired b = (Acquisition.Acquired) join(s.acquire(key("w"), FP, LONG, HOUR));
      // The counter is gone (a fresh server), yet the token is above the lost one: the clock term.
      assertThat(b.token()).isGreaterThan(before);
      assertThat(join(s.complete(key("w"), before, utf8("stale"))))
          .isEqualTo(new Settlement.Fenced(b.token()));
    }
  }

  @Test
  void theBuilderRefusesBadSettingsAndAnUnreachableServer() {
    assertThatThrownBy(() -> RedisKeyStore.builder().prefix("a{b}"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("prefix");
    assertThatThrownBy(() -> RedisKeyStore.builder().prefix("")).hasMessageContaining("prefix");
    assertThatThrownBy(() -> RedisKeyStore.builder().timeout(Duration.ZERO))
        .hasMessageContaining("timeout");
    assertThatThrownBy(() -> RedisKeyStore.builder().maxResponseBytes(-1))
        .hasMessageContaining("maxResponseBytes");
    assertThatThrownBy(() -> RedisKeyStore.builder().maxBatch(0)).hasMessageContaining("maxBatch");
    assertThatThrownBy(() -> RedisKeyStore.builder().maxBatch(RedisKeyStore.MAX_BATCH_LIMIT + 1))
        .hasMessageContaining("maxBatch");
    assertThatThrownBy(() -> RedisKeyStore.builder().build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("exactly one");
    assertThatThrownBy(() -> RedisKeyStore.builder().uri("http://x"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () ->
                RedisKeyStore.builder()
                    .uri("redis://127.0.0.1:" + LocalCluster.freePort())
                    .timeout(Duration.ofSeconds(1))
                    .build())
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("cannot connect");
  }

  @Test
  void aClientPassedInStaysTheCallersAfterClose() {
    RedisClient mine = RedisClient.create(server.uri());
    try {
      RedisKeyStore s = RedisKeyStore.builder().client(mine).prefix("mine").build();
      assertThat(join(s.acquire(key("mine"), FP, LONG, HOUR)))
          .isInstanceOf(Acquisition.Acquired.class);
      s.close();
      try (StatefulRedisConnection<String, String> c = mine.connect()) {
        assertThat(c.sync().ping()).isEqualTo("PONG");
      }
    } finally {
      mine.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  @Test
  void callsThatWaitShareAScriptAndEachDecidesAsItWouldAlone() {
    try (RedisKeyStore s = RedisKeyStore.builder().uri(server.uri()).prefix("batch").build()) {
      int keys = 400;
      List<CompletableFuture<Acquisition>> acquires = new ArrayList<>();
      for (int round = 0; round < 3; round++) {
        for (int i = 0; i < keys; i++) {
          acquires.add(s.acquire(key("b" + i), FP, LONG, HOUR).toCompletableFuture());
        }
      }
      Map<Integer, Long> owners = new HashMap<>();
      Set<Long> tokens = new HashSet<>();
      for (int n = 0; n < acquires.size(); n++) {
        Acquisition a = join(acquires.get(n));
        int i = n % keys;
        if (a instanceof Acquisition.Acquired got) { // exactly one of each key's three acquires
          assertThat(owners.put(i, got.token())).as("a second owner of key %d", i).isNull();
          assertThat(tokens.add(got.token())).isTrue();
        } else {
          assertThat(a).isInstanceOf(Acquisition.InProgress.class);
        }
      }
      assertThat(owners).hasSize(keys);
      ScriptBatcher b = s.batcher();
      assertThat(b.transitionsSent()).isEqualTo(3L * keys);
      // One script in flight at a time: 1,200 calls issued at once went in far fewer scripts.
      assertThat(b.scriptsSent()).isLessThan(b.transitionsSent() / 2);
      List<CompletableFuture<Settlement>> completes = new ArrayList<>();
      for (int i = 0; i < keys; i++) {
        completes.add(s.complete(key("b" + i), owners.get(i), utf8("r" + i)).toCompletableFuture());
        completes.add(
            s.complete(key("b" + i), owners.get(i) - 1, utf8("stale")).toCompletableFuture());
      }
      for (int i = 0; i < keys; i++) {
        assertThat(join(completes.get(2 * i))).isEqualTo(new Settlement.Done(0));
        assertThat(join(completes.get(2 * i + 1)))
            .isEqualTo(new Settlement.Completed(utf8("r" + i)));
        assertThat(join(s.acquire(key("b" + i), FP, LONG, HOUR)))
            .isEqualTo(new Acquisition.Completed(utf8("r" + i)));
      }
      assertThat(Long.parseLong(redis().get("{batch}:token")))
          .isGreaterThanOrEqualTo(tokens.stream().max(Long::compare).orElseThrow());
    }
  }

  @Test
  void withMaxBatchOneEveryCallIsAScriptOfItsOwn() {
    try (RedisKeyStore s =
        RedisKeyStore.builder().uri(server.uri()).prefix("alone").maxBatch(1).build()) {
      List<CompletableFuture<Acquisition>> acquires = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        acquires.add(s.acquire(key("a" + i), FP, LONG, HOUR).toCompletableFuture());
      }
      // Sent at once, each in a script of its own, before any answer was awaited.
      assertThat(s.batcher().scriptsSent()).isEqualTo(200);
      acquires.forEach(f -> assertThat(join(f)).isInstanceOf(Acquisition.Acquired.class));
      assertThat(s.batcher().scriptsSent()).isEqualTo(200).isEqualTo(s.batcher().transitionsSent());
    }
  }

  @Test
  void aTransitionThatFailsInABatchFailsAloneAndTheOthersRun() {
    IdempotencyKey poisoned = key("poisoned");
    // A list where the record should be (with a TTL, as every key of these tests has one).
    String name = new String(store.recordKey(poisoned), StandardCharsets.UTF_8);
    redis().rpush(name, "not a record");
    redis().expire(name, 3600);
    List<Object> replies =
        join(
            runBatch(
                List.of(
                    acquireCall(key("before-poison"), "p1"),
                    acquireCall(poisoned, "p2"),
                    acquireCall(key("after-poison"), "p3"))));
    assertThat(text(reply(replies.get(0)))).startsWith("A ");
    assertThat(text(reply(replies.get(1)))).startsWith("X ").contains("WRONGTYPE");
    assertThat(text(reply(replies.get(2)))).startsWith("A ");
    long first = Long.parseLong(text(reply(replies.get(0))).split(" ")[1]);
    long last = Long.parseLong(text(reply(replies.get(2))).split(" ")[1]);
    assertThat(last).isGreaterThan(first);
    assertThat(Long.parseLong(redis().get("{contract}:token"))).isGreaterThanOrEqualTo(last);
    // Through the store: the poisoned call fails with an unknown outcome, never a yes.
    assertThatThrownBy(() -> join(store.acquire(poisoned, FP, LONG, HOUR)))
        .hasRootCauseInstanceOf(io.lettuce.core.RedisCommandExecutionException.class)
        .cause()
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("WRONGTYPE");
  }

  @Test
  void aStringThatIsNotARecordFailsEveryCallAndIsLeftAsItIs() {
    IdempotencyKey k = key("foreign-string");
    String name = new String(store.recordKey(k), StandardCharsets.UTF_8);
    // Short; long enough to unpack but with a layout byte of no record; a layout byte of a
    // record followed by zeros (token 0, retention 0).
    for (String foreign :
        List.of("x", "not a key record, but long enough to unpack", "\u0001" + "\0".repeat(36))) {
      redis().set(name, foreign, io.lettuce.core.SetArgs.Builder.ex(3600));
      assertThatThrownBy(() -> join(store.acquire(k, FP, LONG, HOUR)))
          .as(foreign)
          .cause()
          .isInstanceOf(KeyStoreException.class);
      assertThatThrownBy(() -> join(store.complete(k, 1, utf8("r"))))
          .as(foreign)
          .cause()
          .isInstanceOf(KeyStoreException.class);
      assertThat(redis().get(name)).isEqualTo(foreign);
    }
  }

  @Test
  void recordsAnEarlierVersionWroteAsHashesAreReadAndReplacedByTheNextWrite() {
    long now = Long.parseLong(redis().time().get(0)) * 1000;
    // Completed, as the store wrote records before they were packed: fields f, t, d, r, a, v, c.
    IdempotencyKey done = key("hash-completed");
    String doneName = hashRecord(done, 41, now, "paid", now);
    assertThat(join(store.acquire(done, Fingerprint.none(), LONG, HOUR)))
        .isEqualTo(new Acquisition.Completed(utf8("paid")));
    assertThat(join(store.acquire(done, FP, LONG, HOUR))).isEqualTo(new Acquisition.Mismatch());
    RedisKeyRecord shown = join(store.show(done)).orElseThrow();
    assertThat(shown.completed()).isTrue();
    assertThat(shown.token()).isEqualTo(41);
    assertThat(shown.response()).isEqualTo(utf8("paid"));
    assertThat(redis().type(doneName)).isEqualTo("hash"); // reads leave it as it is

    // In progress, its owner (token 42) past its deadline and not taken over: it renews, which
    // rewrites the record packed, and completes.
    IdempotencyKey held = key("hash-in-progress");
    String heldName = hashRecord(held, 42, now - 60_000, null, 0);
    assertThat(join(store.renew(held, 42, LONG))).isInstanceOf(Settlement.Done.class);
    assertThat(redis().type(heldName)).isEqualTo("string");
    assertThat(join(store.show(held)).orElseThrow().token()).isEqualTo(42);
    assertThat(join(store.acquire(held, Fingerprint.none(), LONG, HOUR)))
        .isInstanceOf(Acquisition.InProgress.class);
    assertThat(join(store.complete(held, 42, utf8("late-but-owner"))))
        .isEqualTo(new Settlement.Done(0));
    assertThat(join(store.acquire(held, Fingerprint.none(), LONG, HOUR)))
        .isEqualTo(new Acquisition.Completed(utf8("late-but-owner")));

    // In progress and past its deadline: the next acquire takes it over, and fences its owner.
    IdempotencyKey stale = key("hash-stale");
    String staleName = hashRecord(stale, 43, now - 60_000, null, 0);
    Acquisition.Acquired over =
        (Acquisition.Acquired) join(store.acquire(stale, Fingerprint.none(), LONG, HOUR));
    assertThat(over.token()).isGreaterThan(43);
    assertThat(join(store.complete(stale, 43, utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(over.token()));
    assertThat(redis().type(staleName)).isEqualTo("string");
  }

  /**
   * Writes {@code k}'s record as a hash, as the store did before records were packed (no
   * fingerprint, retention an hour, kept an hour); completed if {@code response} is not null.
   */
  private String hashRecord(
      IdempotencyKey k, long token, long deadlineMs, String response, long completedAtMs) {
    String name = new String(store.recordKey(k), StandardCharsets.UTF_8);
    java.util.Map<String, String> fields = new java.util.HashMap<>();
    fields.put("f", "");
    fields.put("t", Long.toString(token));
    fields.put("d", Long.toString(deadlineMs));
    fields.put("r", "3600000");
    fields.put("a", "old:" + token);
    if (response != null) {
      fields.put("v", response);
      fields.put("c", Long.toString(completedAtMs));
    }
    redis().hset(name, fields);
    redis().expire(name, 3600);
    return name;
  }

  @Test
  void aTransitionRefusedForMemoryFailsAloneAndDrawsNoToken() {
    IdempotencyKey done = key("done-before-oom");
    Acquisition.Acquired a = (Acquisition.Acquired) join(store.acquire(done, FP, LONG, HOUR));
    assertThat(join(store.complete(done, a.token(), utf8("kept"))))
        .isEqualTo(new Settlement.Done(0));
    String counter = redis().get("{contract}:token");
    redis().configSet("maxmemory", "1"); // every write is refused (noeviction), reads still run
    try {
      List<Object> replies =
          join(runBatch(List.of(acquireCall(done, "o1"), acquireCall(key("new-in-oom"), "o2"))));
      assertThat(text(reply(replies.get(0)))).isEqualTo("C kept"); // a read, answered
      assertThat(text(reply(replies.get(1)))).startsWith("X ").contains("OOM");
    } finally {
      redis().configSet("maxmemory", "0");
    }
    assertThat(redis().get("{contract}:token")).isEqualTo(counter);
  }

  @Test
  void aMalformedBatchIsRefusedBeforeItWritesAnything() {
    String counter = redis().get("{contract}:token");
    byte[] record = store.recordKey(key("malformed"));
    byte[] malformed = store.recordKey(key("malformed-2"));
    byte[][] keys = {store.counterKey(), record, malformed};
    // A valid acquire, then one with three arguments instead of four: the first must not run.
    byte[][] args = {
      utf8("A"),
      utf8("4"),
      FP.bytes(),
      utf8("60000"),
      utf8("3600000"),
      utf8("m1"),
      utf8("A"),
      utf8("3"),
      FP.bytes(),
      utf8("60000"),
      utf8("3600000")
    };
    assertThatThrownBy(() -> join(KeyScript.TRANSITIONS.run(asyncOf(), keys, args)))
        .hasMessageContaining("malformed batch");
    byte[][] tooFewKeys = {store.counterKey()};
    byte[][] release = {utf8("R"), utf8("1"), utf8("5")};
    assertThatThrownBy(() -> join(KeyScript.TRANSITIONS.run(asyncOf(), tooFewKeys, release)))
        .hasMessageContaining("malformed batch");
    assertThat(redis().exists(new String(record, StandardCharsets.UTF_8))).isZero();
    assertThat(redis().exists(new String(malformed, StandardCharsets.UTF_8))).isZero();
    assertThat(redis().get("{contract}:token")).isEqualTo(counter);
  }

  @Test
  void closingTheStoreEndsEveryCallStillWaitingOrInFlight() {
    // A timeout far beyond the bound below: only close() can end the waiting calls in time.
    RedisKeyStore s =
        RedisKeyStore.builder()
            .uri(server.uri())
            .prefix("closing")
            .timeout(Duration.ofSeconds(60))
            .build();
    List<CompletableFuture<Acquisition>> acquires = new ArrayList<>();
    for (int i = 0; i < 30_000; i++) {
      acquires.add(s.acquire(key("c" + i), FP, LONG, HOUR).toCompletableFuture());
    }
    s.close();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    int droppedWhileWaiting = 0;
    for (CompletableFuture<Acquisition> f : acquires) {
      try {
        long left = Math.max(0, deadline - System.nanoTime());
        assertThat(f.get(left, TimeUnit.NANOSECONDS)).isInstanceOf(Acquisition.Acquired.class);
      } catch (ExecutionException e) {
        assertThat(e.getCause()).isInstanceOf(KeyStoreException.class);
        if (e.getCause().getMessage().contains("the store was closed")) {
          droppedWhileWaiting++;
        }
      } catch (Exception e) {
        throw new AssertionError("a call neither answered nor failed after close", e);
      }
    }
    // The batcher's own close ended the calls still queued (the connection's close cannot: they
    // were never sent).
    assertThat(droppedWhileWaiting).isPositive();
    Throwable late =
        join(s.acquire(key("late"), FP, LONG, HOUR).toCompletableFuture().handle((a, e) -> e));
    assertThat(late).isInstanceOf(KeyStoreException.class).hasMessageContaining("store is closed");
  }

  // ---- helpers ----

  private static RedisAsyncCommands<byte[], byte[]> asyncOf() {
    return adminBytes.async();
  }

  private ScriptBatcher.Call acquireCall(IdempotencyKey k, String attempt) {
    return new ScriptBatcher.Call(
        'A',
        new byte[][] {store.recordKey(k)},
        FP.bytes(),
        utf8("60000"),
        utf8("3600000"),
        utf8(attempt));
  }

  /** Runs one transition as a script of its own, on the admin connection; its one reply. */
  private CompletableFuture<List<Object>> runAlone(ScriptBatcher.Call call) {
    return runBatch(List.of(call)).thenApply(replies -> reply(replies.get(0)));
  }

  /** Runs {@code calls} as one script, on the admin connection; the script's replies. */
  private CompletableFuture<List<Object>> runBatch(List<ScriptBatcher.Call> calls) {
    ScriptBatcher.Encoded e = ScriptBatcher.encode(store.counterKey(), calls);
    return KeyScript.TRANSITIONS.run(asyncOf(), e.keys(), e.args());
  }

  @SuppressWarnings("unchecked")
  private static List<Object> reply(Object o) {
    return (List<Object>) o;
  }

  private static String text(List<Object> reply) {
    StringBuilder b = new StringBuilder();
    for (Object o : reply) {
      b.append(b.length() == 0 ? "" : " ").append(new String((byte[]) o, StandardCharsets.UTF_8));
    }
    return b.toString();
  }

  /** Asks until the store answers (the client reconnects by itself), bounded. */
  static Acquisition awaitAnswer(RedisKeyStore s, IdempotencyKey k) throws InterruptedException {
    long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
    while (true) {
      try {
        return join(s.acquire(k, FP, LONG, HOUR));
      } catch (CompletionException e) {
        assertThat(e).hasCauseInstanceOf(KeyStoreException.class);
        assertThat(System.nanoTime()).as("no answer after a restart").isLessThan(end);
        Thread.sleep(50);
      }
    }
  }

  static void deleteRecursively(Path p) throws IOException {
    try (Stream<Path> walk = Files.walk(p)) {
      for (Path x : walk.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(x);
      }
    }
  }
}
