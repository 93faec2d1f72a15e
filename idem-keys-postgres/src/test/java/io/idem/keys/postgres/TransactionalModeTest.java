package io.idem.keys.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyMismatchException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.StoredFailureException;
import io.idem.keys.spi.Acquisition;
import io.idem.testkit.stores.PostgresServer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The transactional mode: the key's acquisition, the business write (a withdrawal: a row in {@code
 * withdrawals} and a debit of {@code accounts}) and the key's completion in one transaction on the
 * caller's connection. The withdrawals table has no unique constraint: only the key keeps a
 * withdrawal from being written twice.
 */
@Timeout(120)
class TransactionalModeTest {
  static final Fingerprint FP =
      Fingerprint.of("withdraw 100 from 1".getBytes(StandardCharsets.UTF_8));
  static final long AMOUNT = 100;

  /** A business failure chosen to be final: stored and replayed. */
  static final class DeclinedException extends Exception {
    private static final long serialVersionUID = 1L;

    DeclinedException(String message) {
      super(message);
    }
  }

  static PostgresServer server;
  static HikariDataSource pool;
  static PostgresKeyStore store;
  final String scope = "tx-" + UUID.randomUUID();
  final AtomicInteger runs = new AtomicInteger();

  @BeforeAll
  static void start() throws SQLException {
    server = PostgresServer.startFast();
    pool = server.pool(24, 2000);
    store =
        PostgresKeyStore.builder(pool)
            .storeFailures(DeclinedException.class)
            .purgeEvery(Duration.ZERO)
            .build();
    store.migrate();
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL)");
      s.execute(
          "CREATE TABLE withdrawals (id bigserial PRIMARY KEY, idem_key text NOT NULL,"
              + " account integer NOT NULL, amount bigint NOT NULL, token bigint NOT NULL)");
    }
  }

  @AfterAll
  static void stop() {
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

  @Test
  void concurrentDuplicatesWithdrawOnceAndAllGetTheSameResponse() throws Exception {
    for (int round = 0; round < 3; round++) {
      int account = openAccount(10_000);
      IdempotencyKey k = key("withdraw-" + round);
      int n = 16;
      ExecutorService threads = Executors.newFixedThreadPool(n);
      CountDownLatch go = new CountDownLatch(1);
      List<Future<String>> answers = new ArrayList<>();
      try {
        for (int i = 0; i < n; i++) {
          answers.add(
              threads.submit(
                  () -> {
                    go.await();
                    try (Connection c = pool.getConnection()) {
                      byte[] r =
                          store.inTransaction(
                              c,
                              k,
                              FP,
                              (conn, token) -> {
                                byte[] out = withdraw(conn, k, account, token);
                                Thread.sleep(200); // the duplicates pile up behind the key's lock
                                return out;
                              });
                      assertThat(c.getAutoCommit()).isTrue();
                      return new String(r, StandardCharsets.UTF_8);
                    }
                  }));
        }
        go.countDown();
        List<String> got = new ArrayList<>();
        for (Future<String> f : answers) {
          got.add(f.get(60, TimeUnit.SECONDS));
        }
        assertThat(got).hasSize(n).containsOnly(got.get(0));
        assertThat(got.get(0)).endsWith("balance " + (10_000 - AMOUNT));
      } finally {
        threads.shutdownNow();
      }
      assertThat(withdrawals(k)).isEqualTo(1);
      assertThat(balance(account)).isEqualTo(10_000 - AMOUNT);
    }
    assertThat(runs).hasValue(3);
  }

  @Test
  void aFailedWorkRollsBackItsWriteWithTheKeyAndARetryRunsIt() throws Exception {
    int account = openAccount(500);
    IdempotencyKey k = key("fails-once");
    try (Connection c = pool.getConnection()) {
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      k,
                      FP,
                      (conn, token) -> {
                        withdraw(conn, k, account, token);
                        throw new IOException("the ledger service timed out");
                      }))
          .isInstanceOf(IOException.class)
          .hasMessage("the ledger service timed out");
      assertThat(c.getAutoCommit()).isTrue();
      assertThat(withdrawals(k)).isZero();
      assertThat(balance(account)).isEqualTo(500);
      assertThat(records(k)).isZero();

      byte[] r = store.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token));
      assertThat(new String(r, StandardCharsets.UTF_8)).endsWith("balance 400");
      assertThat(withdrawals(k)).isEqualTo(1);
    }
  }

  @Test
  void aConnectionKilledBetweenTheBusinessWriteAndTheCommitLeavesNeither() throws Exception {
    int account = openAccount(700);
    IdempotencyKey k = key("killed");
    try (Connection c = pool.getConnection()) {
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      k,
                      FP,
                      (conn, token) -> {
                        byte[] out = withdraw(conn, k, account, token);
                        terminate(backendPid(conn)); // the process dies before the commit
                        return out;
                      }))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("outcome is unknown");
    }
    assertThat(withdrawals(k)).isZero();
    assertThat(balance(account)).isEqualTo(700);
    assertThat(records(k)).isZero();
    try (Connection c = pool.getConnection()) {
      byte[] r = store.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token));
      assertThat(new String(r, StandardCharsets.UTF_8)).endsWith("balance 600");
    }
    assertThat(withdrawals(k)).isEqualTo(1);
    assertThat(runs).hasValue(2);
  }

  @Test
  void aDuplicateBehindALongTransactionGetsInProgressAfterTheLockTimeoutThenTheReplay()
      throws Exception {
    int account = openAccount(900);
    IdempotencyKey k = key("long");
    CountDownLatch inWork = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    ExecutorService one = Executors.newSingleThreadExecutor();
    try (PostgresKeyStore impatient =
        PostgresKeyStore.builder(pool)
            .lockTimeout(Duration.ofMillis(300))
            .purgeEvery(Duration.ZERO)
            .build()) {
      Future<byte[]> first =
          one.submit(
              () -> {
                try (Connection c = pool.getConnection()) {
                  return store.inTransaction(
                      c,
                      k,
                      FP,
                      (conn, token) -> {
                        byte[] out = withdraw(conn, k, account, token);
                        inWork.countDown();
                        finish.await();
                        return out;
                      });
                }
              });
      assertThat(inWork.await(30, TimeUnit.SECONDS)).isTrue();
      try (Connection c = pool.getConnection()) {
        long start = System.nanoTime();
        assertThatThrownBy(
                () ->
                    impatient.inTransaction(
                        c, k, FP, (conn, token) -> withdraw(conn, k, account, token)))
            .isInstanceOf(KeyInProgressException.class)
            .hasMessageContaining("lock timeout");
        assertThat(Duration.ofNanos(System.nanoTime() - start))
            .isBetween(Duration.ofMillis(250), Duration.ofSeconds(10));
        assertThat(c.getAutoCommit()).isTrue();
        finish.countDown();
        byte[] committed = first.get(30, TimeUnit.SECONDS);
        byte[] replayed =
            impatient.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token));
        assertThat(replayed).isEqualTo(committed);
      }
    } finally {
      finish.countDown();
      one.shutdownNow();
    }
    assertThat(runs).hasValue(1);
    assertThat(withdrawals(k)).isEqualTo(1);
    assertThat(balance(account)).isEqualTo(800);
  }

  @Test
  void aStoredFailureUndoesTheWorksWritesAndIsReplayedHereAndByTheExecutor() throws Exception {
    int account = openAccount(50);
    IdempotencyKey k = key("declined");
    try (Connection c = pool.getConnection()) {
      TransactionalWork work =
          (conn, token) -> {
            withdraw(conn, k, account, token);
            throw new DeclinedException("insufficient funds: 50 < 100");
          };
      assertThatThrownBy(() -> store.inTransaction(c, k, FP, work))
          .isInstanceOf(DeclinedException.class);
      assertThat(withdrawals(k)).isZero();
      assertThat(balance(account)).isEqualTo(50);
      assertThat(records(k)).isEqualTo(1);
      assertThatThrownBy(() -> store.inTransaction(c, k, FP, work))
          .isInstanceOfSatisfying(
              StoredFailureException.class,
              e -> {
                assertThat(e.failureType()).isEqualTo(DeclinedException.class.getName());
                assertThat(e.getMessage()).contains("insufficient funds: 50 < 100");
              });
    }
    try (var ex = IdempotentExecutor.builder(store).build()) {
      assertThatThrownBy(
              () -> ex.execute(k, FP, IdempotentExecutor.Codec.utf8(), t -> "ran " + runs.get()))
          .isInstanceOf(StoredFailureException.class)
          .hasMessageContaining("insufficient funds");
    }
    assertThat(runs).hasValue(1);
  }

  @Test
  void outcomesReplayAcrossTheTransactionalAndTheStandardMode() throws Exception {
    int account = openAccount(1000);
    IdempotencyKey tx = key("tx-then-executor");
    try (Connection c = pool.getConnection()) {
      byte[] r =
          store.inTransaction(c, tx, FP, (conn, token) -> withdraw(conn, tx, account, token));
      try (var ex = IdempotentExecutor.builder(store).build()) {
        assertThat(ex.execute(tx, FP, IdempotentExecutor.Codec.utf8(), t -> "ran again"))
            .isEqualTo(new String(r, StandardCharsets.UTF_8));
        IdempotencyKey std = key("executor-then-tx");
        String first = ex.execute(std, FP, IdempotentExecutor.Codec.utf8(), t -> "shipped " + t);
        assertThat(
                store.inTransaction(
                    c, std, FP, (conn, token) -> withdraw(conn, std, account, token)))
            .isEqualTo(first.getBytes(StandardCharsets.UTF_8));
      }
    }
    assertThat(runs).hasValue(1);
  }

  @Test
  void anotherPayloadOrAnOwnerOfTheStandardModeRunsNothing() throws Exception {
    int account = openAccount(300);
    IdempotencyKey k = key("refused");
    try (Connection c = pool.getConnection()) {
      store.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token));
      Fingerprint other = Fingerprint.of("withdraw 999 from 1".getBytes(StandardCharsets.UTF_8));
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c, k, other, (conn, token) -> withdraw(conn, k, account, token)))
          .isInstanceOf(KeyMismatchException.class);

      IdempotencyKey held = key("held-outside");
      Acquisition a =
          store
              .acquire(held, FP, Duration.ofMinutes(1), Duration.ofHours(1))
              .toCompletableFuture()
              .join();
      assertThat(a).isInstanceOf(Acquisition.Acquired.class);
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c, held, FP, (conn, token) -> withdraw(conn, held, account, token)))
          .isInstanceOf(KeyInProgressException.class)
          .hasMessageContaining("outside a transaction");
      assertThat(c.getAutoCommit()).isTrue();
    }
    assertThat(runs).hasValue(1);
    assertThat(balance(account)).isEqualTo(200);
  }

  @Test
  void theConnectionMustNotBeInsideATransactionAndKeepsItsAutoCommitMode() throws Exception {
    int account = openAccount(400);
    IdempotencyKey k = key("begun");
    try (Connection c = pool.getConnection()) {
      c.setAutoCommit(false);
      try (Statement s = c.createStatement()) {
        s.execute("SELECT 1");
      }
      assertThatThrownBy(
              () ->
                  store.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token)))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("inside a transaction");
      c.rollback();
      store.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token));
      assertThat(c.getAutoCommit()).isFalse();
    }
    assertThat(withdrawals(k)).isEqualTo(1);
  }

  @Test
  void anOversizeResponseANullResponseOrAnErrorWriteNothing() throws Exception {
    int account = openAccount(600);
    try (PostgresKeyStore small =
            PostgresKeyStore.builder(pool).maxResponseBytes(16).purgeEvery(Duration.ZERO).build();
        Connection c = pool.getConnection()) {
      IdempotencyKey big = key("big");
      assertThatThrownBy(
              () ->
                  small.inTransaction(
                      c,
                      big,
                      FP,
                      (conn, token) -> {
                        withdraw(conn, big, account, token);
                        return new byte[16]; // 17 bytes stored: one over the bound
                      }))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("over maxResponseBytes 16");
      IdempotencyKey none = key("null");
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      none,
                      FP,
                      (conn, token) -> {
                        withdraw(conn, none, account, token);
                        return null;
                      }))
          .isInstanceOf(IllegalStateException.class);
      // An Error is rolled back too: restoring auto-commit would otherwise commit the transaction.
      IdempotencyKey error = key("error");
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      error,
                      FP,
                      (conn, token) -> {
                        withdraw(conn, error, account, token);
                        throw new AssertionError("a bug in the work");
                      }))
          .isInstanceOf(AssertionError.class);
      assertThat(c.getAutoCommit()).isTrue();
      for (IdempotencyKey k : List.of(big, none, error)) {
        assertThat(withdrawals(k)).isZero();
        assertThat(records(k)).isZero();
      }
    }
    assertThat(balance(account)).isEqualTo(600);
  }

  @Test
  void theWorkGetsATokenGreaterThanEveryEarlierOneAndTheCommittedRecordHoldsIt() throws Exception {
    IdempotencyKey k = key("token");
    Acquisition.Acquired earlier =
        (Acquisition.Acquired)
            store
                .acquire(k, FP, Duration.ofMillis(1), Duration.ofHours(1))
                .toCompletableFuture()
                .join();
    Thread.sleep(20); // past the standard owner's deadline: the transaction takes the key over
    long[] seen = new long[1];
    try (Connection c = pool.getConnection()) {
      store.inTransaction(
          c,
          k,
          FP,
          (conn, token) -> {
            seen[0] = token;
            return new byte[0];
          });
    }
    assertThat(seen[0]).isGreaterThan(earlier.token());
    try (Connection c = pool.getConnection();
        PreparedStatement s =
            c.prepareStatement("SELECT token, state FROM idem_keys WHERE scope = ? AND key = ?")) {
      s.setString(1, k.scope());
      s.setString(2, k.key());
      try (ResultSet r = s.executeQuery()) {
        assertThat(r.next()).isTrue();
        assertThat(r.getLong(1)).isEqualTo(seen[0]);
        assertThat(r.getString(2)).isEqualTo("completed");
      }
    }
    assertThat(store.complete(k, earlier.token(), new byte[0]).toCompletableFuture().join())
        .isInstanceOf(io.idem.keys.spi.Settlement.Completed.class);
  }

  @Test
  void aWorkThatEndsTheTransactionOrGoesOnAfterAFailedStatementRecordsNoOutcome() throws Exception {
    int account = openAccount(800);
    IdempotencyKey committed = key("work-commits");
    IdempotencyKey swallowed = key("work-swallows");
    try (Connection c = pool.getConnection()) {
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      committed,
                      FP,
                      (conn, token) -> {
                        byte[] out = withdraw(conn, committed, account, token);
                        conn.commit(); // not allowed: the write is no longer tied to the key
                        return out;
                      }))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("ended the transaction");
      assertThat(records(committed)).isZero();
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      swallowed,
                      FP,
                      (conn, token) -> {
                        try (Statement s = conn.createStatement()) {
                          s.execute("SELECT 1 / 0");
                        } catch (SQLException ignored) {
                          // swallowed: the transaction is aborted all the same
                        }
                        return new byte[] {1};
                      }))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("aborted");
      assertThat(records(swallowed)).isZero();
      assertThat(c.getAutoCommit()).isTrue();
    }
  }

  @Test
  void inOpenTransactionJoinsTheCallersTransactionForSeveralKeys() throws Exception {
    int account = openAccount(10_000);
    IdempotencyKey a = key("open-a");
    IdempotencyKey b = key("open-b");
    try (Connection c = pool.getConnection()) {
      c.setAutoCommit(false);
      store.inOpenTransaction(c, a, FP, (conn, token) -> withdraw(conn, a, account, token));
      store.inOpenTransaction(c, b, FP, (conn, token) -> withdraw(conn, b, account, token));
      assertThat(c.getAutoCommit()).isFalse(); // still the caller's, still open
      c.rollback();
      assertThat(withdrawals(a) + withdrawals(b) + records(a) + records(b)).isZero();

      byte[] first =
          store.inOpenTransaction(c, a, FP, (conn, token) -> withdraw(conn, a, account, token));
      store.inOpenTransaction(c, b, FP, (conn, token) -> withdraw(conn, b, account, token));
      assertThat(records(a)).isZero(); // not before the caller commits
      c.commit();
      assertThat(withdrawals(a) + withdrawals(b)).isEqualTo(2);
      assertThat(records(a) + records(b)).isEqualTo(2);

      runs.set(0);
      byte[] replayed =
          store.inOpenTransaction(c, a, FP, (conn, token) -> withdraw(conn, a, account, token));
      c.commit();
      assertThat(runs).hasValue(0);
      assertThat(replayed).isEqualTo(first);
      assertThat(balance(account)).isEqualTo(10_000 - 2 * AMOUNT);
      c.setAutoCommit(true);
      assertThatThrownBy(
              () -> store.inOpenTransaction(c, key("open-c"), FP, (conn, token) -> new byte[0]))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("auto-commit");
    }
  }

  // ---- the business step and checks ----

  IdempotencyKey key(String name) {
    return new IdempotencyKey(scope, name);
  }

  @Test
  void aConnectionLostDuringTheWorkIsAStoreFailureAndARetryWithdrawsOnce() throws Exception {
    int account = openAccount(1_000);
    IdempotencyKey k = key("connection-lost");
    try (Connection c = pool.getConnection()) {
      assertThatThrownBy(
              () ->
                  store.inTransaction(
                      c,
                      k,
                      FP,
                      (conn, token) -> {
                        withdraw(conn, k, account, token);
                        terminate(conn); // the server ends the session, as a failover would
                        return withdraw(conn, k, account, token);
                      }))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("connection to PostgreSQL broke")
          .hasMessageContaining("did not commit")
          .hasCauseInstanceOf(SQLException.class);
    }
    assertThat(withdrawals(k)).isZero();
    assertThat(records(k)).isZero();
    assertThat(balance(account)).isEqualTo(1_000);
    try (Connection c = pool.getConnection()) {
      byte[] r = store.inTransaction(c, k, FP, (conn, token) -> withdraw(conn, k, account, token));
      assertThat(new String(r, StandardCharsets.UTF_8)).endsWith("balance 900");
    }
    assertThat(withdrawals(k)).isEqualTo(1);
  }

  /** Ends {@code c}'s server session from another connection, as an operator or failover does. */
  private static void terminate(Connection c) throws SQLException {
    long pid;
    try (Statement s = c.createStatement();
        ResultSet r = s.executeQuery("SELECT pg_backend_pid()")) {
      r.next();
      pid = r.getLong(1);
    }
    try (Connection other = pool.getConnection();
        PreparedStatement s =
            other.prepareStatement("SELECT pg_terminate_backend(?::integer, 5000)")) {
      s.setLong(1, pid);
      try (ResultSet r = s.executeQuery()) {
        r.next();
        assertThat(r.getBoolean(1)).as("backend %d terminated", pid).isTrue();
      }
    }
  }

  /** The withdrawal: a row and a debit, both through {@code c}. */
  byte[] withdraw(Connection c, IdempotencyKey k, int account, long token) throws SQLException {
    runs.incrementAndGet();
    long id;
    try (PreparedStatement s =
        c.prepareStatement(
            "INSERT INTO withdrawals (idem_key, account, amount, token) VALUES (?, ?, ?, ?)"
                + " RETURNING id")) {
      s.setString(1, k.scope() + "/" + k.key());
      s.setInt(2, account);
      s.setLong(3, AMOUNT);
      s.setLong(4, token);
      try (ResultSet r = s.executeQuery()) {
        r.next();
        id = r.getLong(1);
      }
    }
    long balance;
    try (PreparedStatement s =
        c.prepareStatement(
            "UPDATE accounts SET balance = balance - ? WHERE id = ? RETURNING balance")) {
      s.setLong(1, AMOUNT);
      s.setInt(2, account);
      try (ResultSet r = s.executeQuery()) {
        r.next();
        balance = r.getLong(1);
      }
    }
    return ("withdrawal " + id + ", balance " + balance).getBytes(StandardCharsets.UTF_8);
  }

  static final AtomicInteger accounts = new AtomicInteger();

  static int openAccount(long balance) throws SQLException {
    int id = accounts.incrementAndGet();
    try (Connection c = pool.getConnection();
        PreparedStatement s =
            c.prepareStatement("INSERT INTO accounts (id, balance) VALUES (?, ?)")) {
      s.setInt(1, id);
      s.setLong(2, balance);
      s.executeUpdate();
    }
    return id;
  }

  static long balance(int account) throws SQLException {
    return count("SELECT balance FROM accounts WHERE id = ?", Integer.toString(account), true);
  }

  static long withdrawals(IdempotencyKey k) throws SQLException {
    return count(
        "SELECT count(*) FROM withdrawals WHERE idem_key = ?", k.scope() + "/" + k.key(), false);
  }

  static long records(IdempotencyKey k) throws SQLException {
    return count(
        "SELECT count(*) FROM idem_keys WHERE scope || '/' || key = ?",
        k.scope() + "/" + k.key(),
        false);
  }

  private static long count(String sql, String arg, boolean integerArg) throws SQLException {
    try (Connection c = pool.getConnection();
        PreparedStatement s = c.prepareStatement(sql)) {
      if (integerArg) {
        s.setInt(1, Integer.parseInt(arg));
      } else {
        s.setString(1, arg);
      }
      try (ResultSet r = s.executeQuery()) {
        assertThat(r.next()).isTrue();
        return r.getLong(1);
      }
    }
  }

  static int backendPid(Connection c) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet r = s.executeQuery("SELECT pg_backend_pid()")) {
      r.next();
      return r.getInt(1);
    }
  }

  static void terminate(int backendPid) throws SQLException {
    try (Connection c = server.connect();
        PreparedStatement s = c.prepareStatement("SELECT pg_terminate_backend(?, 10000)")) {
      s.setInt(1, backendPid);
      try (ResultSet r = s.executeQuery()) {
        r.next();
        assertThat(r.getBoolean(1)).as("backend %d terminated", backendPid).isTrue();
      }
    }
  }
}
