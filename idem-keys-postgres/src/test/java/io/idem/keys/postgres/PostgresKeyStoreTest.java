package io.idem.keys.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyFencedException;
import io.idem.keys.KeyStoreContract;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.PostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The store contract (idem-keys' {@link KeyStoreContract}, the same cases as every store) and the
 * PostgreSQL store's own promises, on a real server.
 */
@Timeout(120)
class PostgresKeyStoreTest extends KeyStoreContract {
  static final Duration MINUTE = Duration.ofMinutes(1);
  static final Duration HOUR = Duration.ofHours(1);
  static final Duration SHORT = Duration.ofMillis(300);
  static final Fingerprint FP = Fingerprint.of(utf8("pay 10 EUR to acct 7"));

  static PostgresServer server;
  static HikariDataSource pool;
  static PostgresKeyStore store;
  static PostgresKeyStore unreachable;

  @BeforeAll
  static void start() {
    server = PostgresServer.startFast();
    pool = server.pool(8, 2000);
    store = PostgresKeyStore.builder(pool).purgeEvery(Duration.ZERO).build();
    assertThat(store.migrate()).isZero();
    PGSimpleDataSource nobody = new PGSimpleDataSource();
    nobody.setUrl("jdbc:postgresql://127.0.0.1:" + LocalCluster.freePort() + "/idem");
    nobody.setUser(PostgresServer.USER);
    nobody.setConnectTimeout(2);
    unreachable = PostgresKeyStore.builder(nobody).purgeEvery(Duration.ZERO).build();
  }

  @AfterAll
  static void stop() {
    if (unreachable != null) {
      unreachable.close();
    }
    if (store != null) {
      store.close();
    }
    if (pool != null) {
      pool.close();
    }
    if (server != null) {
      server.close();
    }
  }

  @Override
  protected KeyStore<?> store() {
    return store;
  }

  @Override
  protected KeyStore<?> unreachableStore() {
    return unreachable;
  }

  @Override
  protected int maxResponseBytes() {
    return PostgresKeyStore.DEFAULT_MAX_RESPONSE_BYTES;
  }

  // ---- schema ----

  @Test
  void migrateAppliesEachVersionOnceAndRefusesASchemaNewerThanItself() throws SQLException {
    assertThat(store.migrate()).isEqualTo(KeySchema.LATEST);
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement();
        ResultSet r = s.executeQuery("SELECT version, description FROM idem_keys_schema")) {
      assertThat(r.next()).isTrue();
      assertThat(r.getInt(1)).isEqualTo(1);
      assertThat(r.next()).isFalse();
    }
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement()) {
      s.execute("CREATE DATABASE newer");
    }
    PGSimpleDataSource newer = new PGSimpleDataSource();
    newer.setUrl(server.jdbcUrl().replace("/" + PostgresServer.DATABASE, "/newer"));
    newer.setUser(PostgresServer.USER);
    try (PostgresKeyStore other =
        PostgresKeyStore.builder(newer).purgeEvery(Duration.ZERO).build()) {
      assertThat(other.migrate()).isZero();
      try (Connection c = newer.getConnection();
          Statement s = c.createStatement()) {
        s.execute("INSERT INTO idem_keys_schema (version, description) VALUES (2, 'future')");
      }
      assertThatThrownBy(other::migrate)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("version 2, newer than this library's 1");
    }
  }

  @Test
  void theTokenSequenceHasNoPerSessionCache() throws SQLException {
    // A cache would hand out tokens out of order across sessions.
    assertThat(
            queryLong("SELECT cache_size FROM pg_sequences WHERE sequencename = 'idem_key_tokens'"))
        .isEqualTo(1);
  }

  // ---- clock ----

  @Test
  void deadlinesAreTheDatabasesClockPlusTheTimeout() throws SQLException {
    IdempotencyKey k = key("clock");
    long before = databaseNowMs();
    Acquisition.Acquired a = acquired(k, FP, Duration.ofSeconds(90));
    long after = databaseNowMs();
    assertThat(a.deadlineMs()).isBetween(before + 90_000, after + 90_000);
    assertThat(
            queryLong(
                "SELECT idem_key_ms(deadline) FROM idem_keys WHERE scope = '"
                    + k.scope()
                    + "' AND key = 'clock'"))
        .isEqualTo(a.deadlineMs());
  }

  // ---- text ----

  @Test
  void textPostgresqlCannotHoldAsGivenIsAnIllegalArgument() {
    String scope = key("text").scope();
    IdempotencyKey nul = new IdempotencyKey(scope, "a\u0000b");
    assertIllegal(store.acquire(nul, FP, MINUTE, HOUR), "NUL");
    assertIllegal(store.complete(new IdempotencyKey("x\u0000", "k"), 1, new byte[0]), "NUL");
    // Half a surrogate pair would reach the database as '?': two keys, one record.
    IdempotencyKey high = new IdempotencyKey(scope, "k\uD83D");
    IdempotencyKey low = new IdempotencyKey(scope, "k\uDE00");
    assertIllegal(store.acquire(high, FP, MINUTE, HOUR), "unpaired surrogate at index 1");
    assertIllegal(store.release(low, 1), "unpaired surrogate");
    // A whole pair is ordinary text, and not the same key as '?'.
    IdempotencyKey emoji = new IdempotencyKey(scope, "k\uD83D\uDE00");
    IdempotencyKey question = new IdempotencyKey(scope, "k?");
    Acquisition.Acquired e = acquired(emoji, FP, MINUTE);
    assertThat(acquire(question, FP, MINUTE)).isInstanceOf(Acquisition.Acquired.class);
    assertThat(acquire(emoji, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(e.deadlineMs()));
  }

  // ---- atomicity under concurrency ----

  @Test
  void ofManyConcurrentAcquiresOfANewKeyExactlyOneWins() throws Exception {
    for (int round = 0; round < 5; round++) {
      IdempotencyKey k = key("race-" + round);
      List<Acquisition> answers = concurrently(24, () -> acquire(k, FP, SHORT));
      List<Acquisition> owners =
          answers.stream().filter(a -> a instanceof Acquisition.Acquired).toList();
      assertThat(owners).hasSize(1);
      long deadline = ((Acquisition.Acquired) owners.get(0)).deadlineMs();
      assertThat(answers)
          .filteredOn(a -> !(a instanceof Acquisition.Acquired))
          .containsOnly(new Acquisition.InProgress(deadline));
      // And once its deadline passed, of many concurrent takeovers exactly one wins.
      acquireUntil(k, FP, SHORT, PostgresKeyStoreTest::inProgress);
      sleep(SHORT.toMillis() + 50);
      List<Acquisition> takeovers = concurrently(24, () -> acquire(k, FP, MINUTE));
      assertThat(takeovers).filteredOn(a -> a instanceof Acquisition.Acquired).hasSize(1);
    }
  }

  @Test
  void tokensGrowWithEveryChangeOfHandsUnderConcurrentAcquireAndRelease() throws Exception {
    IdempotencyKey k = key("hands");
    AtomicLong last = new AtomicLong();
    AtomicBoolean held = new AtomicBoolean();
    AtomicLong handovers = new AtomicLong();
    concurrently(
        8,
        () -> {
          for (int i = 0; i < 40; i++) {
            Acquisition a = acquire(k, FP, MINUTE);
            if (a instanceof Acquisition.Acquired owned) {
              // Holders never overlap, so this is the order in which the key changed hands.
              assertThat(held.compareAndSet(false, true)).as("two holders at once").isTrue();
              assertThat(owned.token()).isGreaterThan(last.get());
              last.set(owned.token());
              handovers.incrementAndGet();
              held.set(false);
              assertThat(join(store.release(k, owned.token()))).isEqualTo(new Settlement.Done(0));
            }
          }
          return null;
        });
    assertThat(handovers.get()).isGreaterThan(8);
  }

  // ---- retention ----

  @Test
  void purgeDeletesExpiredRecordsOnlyInBoundedBatchesAndInTheBackground() throws Exception {
    try (PostgresKeyStore small =
        PostgresKeyStore.builder(pool).purgeBatch(3).purgeEvery(Duration.ZERO).build()) {
      for (int i = 0; i < 7; i++) {
        IdempotencyKey k = key("purge-" + i);
        Acquisition.Acquired a = acquired(join(small.acquire(k, FP, MINUTE, SHORT)));
        join(small.complete(k, a.token(), utf8("r" + i)));
      }
      IdempotencyKey live = key("purge-live");
      Acquisition.Acquired alive = acquired(join(small.acquire(live, FP, MINUTE, HOUR)));
      sleep(SHORT.toMillis() + 100);
      assertThat(small.purgeExpired()).isEqualTo(3); // at least 7 are due: a full batch
      int rest;
      do {
        rest = small.purgeExpired();
        assertThat(rest).isBetween(0, 3);
      } while (rest == 3);
      assertThat(rowsInScope()).isEqualTo(1);
      assertThat(join(small.acquire(live, FP, MINUTE, HOUR)))
          .isEqualTo(new Acquisition.InProgress(alive.deadlineMs()));
    }
    try (PostgresKeyStore background =
        PostgresKeyStore.builder(pool).purgeEvery(Duration.ofMillis(100)).build()) {
      IdempotencyKey k = key("purge-background");
      Acquisition.Acquired a = acquired(join(background.acquire(k, FP, SHORT, SHORT)));
      assertThat(a.token()).isPositive();
      long end = System.nanoTime() + POLL_BOUND.toNanos();
      while (rowsInScope() > 1) {
        assertThat(System.nanoTime()).as("the background purge did not run").isLessThan(end);
        sleep(50);
      }
    }
  }

  // ---- the standard mode ----

  @Test
  void anExecutorOwnerTakenOverIsFencedAndItsOutcomeIsNotStored() throws Exception {
    IdempotencyKey k = key("stale-executor");
    CountDownLatch running = new CountDownLatch(1);
    CountDownLatch takenOver = new CountDownLatch(1);
    try (var ex =
        IdempotentExecutor.builder(store())
            .inProgressTimeout(SHORT)
            .renewEvery(Duration.ZERO)
            .build()) {
      ExecutorService one = Executors.newSingleThreadExecutor();
      try {
        Future<String> stale =
            one.submit(
                () ->
                    ex.execute(
                        k,
                        FP,
                        IdempotentExecutor.Codec.utf8(),
                        token -> {
                          running.countDown();
                          takenOver.await(); // paused past its deadline (no renewals)
                          return "stale";
                        }));
        assertThat(running.await(30, TimeUnit.SECONDS)).isTrue();
        Acquisition.Acquired owner = acquireUntil(k, FP, MINUTE, PostgresKeyStoreTest::inProgress);
        takenOver.countDown();
        assertThatThrownBy(() -> stale.get(30, TimeUnit.SECONDS))
            .hasCauseInstanceOf(KeyFencedException.class);
        assertThat(acquire(k, FP, MINUTE))
            .isEqualTo(new Acquisition.InProgress(owner.deadlineMs()));
      } finally {
        one.shutdownNow();
      }
    }
  }

  // ---- helpers ----

  Acquisition acquire(IdempotencyKey k, Fingerprint fp, Duration timeout) {
    return join(store().acquire(k, fp, timeout, HOUR));
  }

  Acquisition.Acquired acquired(IdempotencyKey k, Fingerprint fp, Duration timeout) {
    return acquired(acquire(k, fp, timeout));
  }

  static Acquisition.Acquired acquired(Acquisition a) {
    assertThat(a).isInstanceOf(Acquisition.Acquired.class);
    return (Acquisition.Acquired) a;
  }

  /**
   * Acquires {@code k} every 20 ms until it is acquired; every answer before must be one that
   * {@code whileWaiting} accepts. Fails after {@link #POLL_BOUND}.
   */
  Acquisition.Acquired acquireUntil(
      IdempotencyKey k, Fingerprint fp, Duration timeout, Predicate<Acquisition> whileWaiting) {
    long end = System.nanoTime() + POLL_BOUND.toNanos();
    while (true) {
      Acquisition a = acquire(k, fp, timeout);
      if (a instanceof Acquisition.Acquired owned) {
        return owned;
      }
      assertThat(a).as("an answer while waiting to acquire %s", k).matches(whileWaiting);
      assertThat(System.nanoTime()).as("still %s after %s", a, POLL_BOUND).isLessThan(end);
      sleep(20);
    }
  }

  static boolean inProgress(Acquisition a) {
    return a instanceof Acquisition.InProgress;
  }

  static void assertIllegal(CompletionStage<?> stage, String mentioning) {
    assertThatThrownBy(() -> join(stage))
        .isInstanceOf(CompletionException.class)
        .cause()
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(mentioning);
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  long rowsInScope() throws SQLException {
    return queryLong("SELECT count(*) FROM idem_keys WHERE scope = '" + key("x").scope() + "'");
  }

  static long databaseNowMs() throws SQLException {
    return queryLong("SELECT idem_key_ms(clock_timestamp())");
  }

  static long queryLong(String sql) throws SQLException {
    try (Connection c = pool.getConnection();
        PreparedStatement s = c.prepareStatement(sql);
        ResultSet r = s.executeQuery()) {
      assertThat(r.next()).isTrue();
      return r.getLong(1);
    }
  }

  /** Runs {@code n} copies of {@code task} released at once; their results. */
  static <T> List<T> concurrently(int n, java.util.concurrent.Callable<T> task) throws Exception {
    ExecutorService threads = Executors.newFixedThreadPool(n);
    CountDownLatch go = new CountDownLatch(1);
    try {
      List<Future<T>> futures = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        futures.add(
            threads.submit(
                () -> {
                  go.await();
                  return task.call();
                }));
      }
      go.countDown();
      List<T> out = new ArrayList<>();
      for (Future<T> f : futures) {
        out.add(f.get(60, TimeUnit.SECONDS));
      }
      return out;
    } finally {
      threads.shutdownNow();
    }
  }
}
