package io.idem.keys.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyStoreException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.stores.PostgresServer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The store when its server goes away: an immediate shutdown ({@code pg_ctl stop -m immediate}'s
 * SIGQUIT) fails every call with {@link KeyStoreException}, never a yes; what was acknowledged
 * before survives the restart, and tokens keep growing across it.
 */
@Timeout(180)
class ServerFailureTest {
  static final Fingerprint FP = Fingerprint.of("refund 5".getBytes(StandardCharsets.UTF_8));
  static final Duration MINUTE = Duration.ofMinutes(1);
  static final Duration HOUR = Duration.ofHours(1);

  PostgresServer server;
  HikariDataSource pool;
  PostgresKeyStore store;
  final String scope = "failure-" + UUID.randomUUID();

  @BeforeEach
  void start() {
    server = PostgresServer.startFast();
    pool = server.pool(8, 1000);
    store =
        PostgresKeyStore.builder(pool)
            .statementTimeout(Duration.ofSeconds(2))
            .purgeEvery(Duration.ZERO)
            .build();
    store.migrate();
  }

  @AfterEach
  void stop() {
    store.close();
    pool.close();
    server.close();
  }

  @Test
  void aStoppedServerFailsEveryCallWithKeyStoreExceptionAndNothingRuns() throws Exception {
    IdempotencyKey held = key("held");
    Acquisition.Acquired owner = acquired(join(store.acquire(held, FP, MINUTE, HOUR)));
    Connection direct = server.connect();
    long pid = server.pid();

    server.crash();
    assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)).isFalse();

    assertStoreFailure(store.acquire(key("new"), FP, MINUTE, HOUR));
    assertStoreFailure(store.acquire(held, FP, MINUTE, HOUR));
    assertStoreFailure(store.complete(held, owner.token(), new byte[] {1}));
    assertStoreFailure(store.renew(held, owner.token(), MINUTE));
    assertStoreFailure(store.release(held, owner.token()));
    assertThatThrownBy(store::purgeExpired).isInstanceOf(KeyStoreException.class);

    AtomicInteger runs = new AtomicInteger();
    try (var ex = IdempotentExecutor.builder(store).build()) {
      assertThatThrownBy(
              () ->
                  ex.execute(
                      key("executor"),
                      FP,
                      IdempotentExecutor.Codec.utf8(),
                      t -> "ran " + runs.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
    }
    // The transactional mode on a connection opened before the shutdown.
    assertThatThrownBy(
            () ->
                store.inTransaction(
                    direct,
                    key("transactional"),
                    FP,
                    (c, token) -> new byte[] {(byte) runs.incrementAndGet()}))
        .isInstanceOf(KeyStoreException.class);
    assertThat(runs).hasValue(0);
    direct.close();

    server.start();
    // What was acknowledged before the shutdown is still there: the owner keeps its key.
    assertThat(eventually(() -> store.acquire(held, FP, MINUTE, HOUR)))
        .isEqualTo(new Acquisition.InProgress(owner.deadlineMs()));
    assertThat(join(store.complete(held, owner.token(), new byte[] {7})))
        .isEqualTo(new Settlement.Done(0));
    Acquisition.Acquired after = acquired(join(store.acquire(key("after"), FP, MINUTE, HOUR)));
    assertThat(after.token()).isGreaterThan(owner.token());
  }

  @Test
  void anImmediateShutdownUnderLoadLosesNothingAcknowledgedAndTokensKeepGrowing() throws Exception {
    Map<IdempotencyKey, Long> acquiredTokens = new ConcurrentHashMap<>();
    Map<IdempotencyKey, Long> completedTokens = new ConcurrentHashMap<>();
    List<IdempotencyKey> unknown = java.util.Collections.synchronizedList(new ArrayList<>());
    AtomicInteger failures = new AtomicInteger();
    AtomicBoolean running = new AtomicBoolean(true);
    ExecutorService workers = Executors.newFixedThreadPool(8);
    List<Future<?>> loops = new ArrayList<>();
    for (int w = 0; w < 8; w++) {
      int worker = w;
      loops.add(
          workers.submit(
              () -> {
                for (int i = 0; running.get(); i++) {
                  IdempotencyKey k = key("w" + worker + "-" + i);
                  try {
                    Acquisition a = join(store.acquire(k, FP, MINUTE, HOUR));
                    long token = acquired(a).token();
                    acquiredTokens.put(k, token);
                    if (join(store.complete(k, token, payload(k))) instanceof Settlement.Done) {
                      completedTokens.put(k, token);
                    }
                  } catch (CompletionException e) {
                    assertThat(e).hasCauseInstanceOf(KeyStoreException.class);
                    failures.incrementAndGet();
                    unknown.add(k);
                    sleepMs(20);
                  }
                }
                return null;
              }));
    }
    sleepMs(1500);
    long maxBefore;
    server.crash();
    maxBefore = maxToken(acquiredTokens);
    sleepMs(1000);
    server.start();
    sleepMs(1500);
    running.set(false);
    for (Future<?> f : loops) {
      f.get(60, TimeUnit.SECONDS);
    }
    workers.shutdownNow();

    System.out.printf(
        "immediate shutdown under load: %d acquisitions and %d completions acknowledged, %d calls"
            + " failed (KeyStoreException), %d keys left with an unknown outcome%n",
        acquiredTokens.size(), completedTokens.size(), failures.get(), unknown.size());
    assertThat(failures.get()).as("calls that failed while the server was down").isPositive();
    assertThat(completedTokens.size()).isGreaterThan(10);
    // Every acknowledged acquisition and completion is in the table as acknowledged.
    for (Map.Entry<IdempotencyKey, Long> e : acquiredTokens.entrySet()) {
      Long token = tokenInTable(e.getKey());
      assertThat(token).as("record of %s", e.getKey()).isEqualTo(e.getValue());
    }
    for (IdempotencyKey k : completedTokens.keySet()) {
      assertThat(join(store.acquire(k, FP, MINUTE, HOUR)))
          .isEqualTo(new Acquisition.Completed(payload(k)));
    }
    // A call whose outcome was unknown is safe to retry: it acquires, or sees the acquisition
    // that landed, never a second owner beside one.
    for (IdempotencyKey k : unknown) {
      Acquisition retry = join(store.acquire(k, FP, MINUTE, HOUR));
      if (retry instanceof Acquisition.Acquired a) {
        assertThat(a.token()).isGreaterThan(maxBefore);
      } else {
        assertThat(retry)
            .isInstanceOfAny(Acquisition.InProgress.class, Acquisition.Completed.class);
      }
    }
    // Tokens handed out after the restart are greater than every one before it.
    Acquisition.Acquired fresh = acquired(join(store.acquire(key("fresh"), FP, MINUTE, HOUR)));
    assertThat(fresh.token()).isGreaterThan(maxToken(acquiredTokens));
  }

  // ---- helpers ----

  IdempotencyKey key(String name) {
    return new IdempotencyKey(scope, name);
  }

  static byte[] payload(IdempotencyKey k) {
    return ("refunded " + k.key()).getBytes(StandardCharsets.UTF_8);
  }

  static long maxToken(Map<IdempotencyKey, Long> tokens) {
    return tokens.values().stream().mapToLong(Long::longValue).max().orElse(0);
  }

  Long tokenInTable(IdempotencyKey k) throws SQLException {
    try (Connection c = pool.getConnection();
        PreparedStatement s =
            c.prepareStatement("SELECT token FROM idem_keys WHERE scope = ? AND key = ?")) {
      s.setString(1, k.scope());
      s.setString(2, k.key());
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? r.getLong(1) : null;
      }
    }
  }

  static <T> T join(CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }

  static Acquisition.Acquired acquired(Acquisition a) {
    assertThat(a).isInstanceOf(Acquisition.Acquired.class);
    return (Acquisition.Acquired) a;
  }

  static void assertStoreFailure(CompletionStage<?> stage) {
    long start = System.nanoTime();
    assertThatThrownBy(() -> join(stage))
        .isInstanceOf(CompletionException.class)
        .hasCauseInstanceOf(KeyStoreException.class)
        .cause()
        .hasMessageContaining("outcome is unknown");
    assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(10));
  }

  /** The stage's answer, asking again (bounded) while the pool reconnects after a restart. */
  static <T> T eventually(java.util.function.Supplier<CompletionStage<T>> call) {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        return join(call.get());
      } catch (CompletionException e) {
        assertThat(e).hasCauseInstanceOf(KeyStoreException.class);
        assertThat(System.nanoTime()).as("the store did not come back: %s", e).isLessThan(end);
        sleepMs(100);
      }
    }
  }

  static void sleepMs(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }
}
