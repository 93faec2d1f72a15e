package io.idem.lab;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.keys.spi.Settlement;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The PostgreSQL key store as a bench target ({@code idem bench --workload keys --store postgres}),
 * on a server the caller started and owns. A keyed operation takes a key no one used before:
 *
 * <ul>
 *   <li>{@link Mode#transactional}: {@link PostgresKeyStore#inTransaction} on a connection of the
 *       pool: the key's decision, the business step (one {@code INSERT ... RETURNING} into {@code
 *       bench_payments}) and the completion with the response, in one transaction and one commit.
 *       JDBC blocks, so each operation runs on a thread of the target's own pool, one thread per
 *       lane ({@code sessions x window}: the "workers").
 *   <li>{@link Mode#standard}: {@code acquire}, then {@code complete} with the response, through
 *       the store's own calls on the store's own threads (one per lane); the business step is
 *       outside the database, as a call to another service would be, so there is none here.
 * </ul>
 *
 * <p>{@link #check} counts afterwards what the database holds: every acknowledged operation must
 * have left exactly one completed key and, in the transactional mode, exactly one payment.
 */
final class PostgresStoreTarget implements BenchTarget {

  /** Which of the store's two ways of running an operation. */
  enum Mode {
    transactional,
    standard
  }

  /** The most threads a {@link PostgresKeyStore} of its own runs. */
  static final int MAX_STORE_THREADS = 1024;

  private final HikariDataSource pool;
  private final PostgresKeyStore store;
  private final Mode mode;
  private final String run;
  private final Duration inProgress;
  private final Duration retention;
  private final byte[] response;
  private final ExecutorService workers;
  private final AtomicLong acknowledged = new AtomicLong();

  PostgresStoreTarget(
      HikariDataSource pool,
      Mode mode,
      int lanes,
      String run,
      Duration inProgress,
      Duration retention,
      int responseSize) {
    this.pool = pool;
    this.mode = mode;
    this.run = run;
    this.inProgress = inProgress;
    this.retention = retention;
    this.response = new byte[responseSize];
    Arrays.fill(response, (byte) 'r');
    // No purge: the check counts every record the run wrote, and retention may end during a run.
    PostgresKeyStore.Builder b =
        PostgresKeyStore.builder(pool).retention(retention).purgeEvery(Duration.ZERO);
    if (mode == Mode.standard) {
      // Lanes beyond the store's most threads wait in its queue (the pool has fewer connections).
      b.threads(Math.min(lanes, MAX_STORE_THREADS)).queueCapacity(Math.max(1024, lanes));
    } else {
      b.threads(1); // inTransaction runs on the caller's thread; the store's pool stays idle
    }
    this.store = b.build();
    AtomicInteger n = new AtomicInteger();
    this.workers =
        mode == Mode.transactional
            ? Executors.newFixedThreadPool(
                lanes,
                r -> {
                  Thread t = new Thread(r, "bench-pg-worker-" + n.incrementAndGet());
                  t.setDaemon(true);
                  return t;
                })
            : null;
    try {
      store.migrate();
      try (Connection c = pool.getConnection();
          Statement s = c.createStatement()) {
        s.execute(
            "CREATE TABLE IF NOT EXISTS bench_payments (id bigserial PRIMARY KEY,"
                + " idem_key text NOT NULL, token bigint NOT NULL)");
      }
    } catch (SQLException | RuntimeException e) {
      close();
      throw new IllegalStateException("cannot prepare the database: " + e.getMessage(), e);
    }
  }

  @Override
  public String name() {
    return "postgres";
  }

  @Override
  public CompletableFuture<?> op(int session, long n) {
    IdempotencyKey key = new IdempotencyKey(BenchSettings.KEY_SCOPE, run + "-" + session + "-" + n);
    CompletableFuture<?> done =
        mode == Mode.transactional
            ? CompletableFuture.supplyAsync(() -> transaction(key), workers)
            : standard(key);
    return done.thenApply(
        r -> {
          acknowledged.incrementAndGet();
          return r;
        });
  }

  private byte[] transaction(IdempotencyKey key) {
    try (Connection c = pool.getConnection()) {
      return store.inTransaction(
          c, key, Fingerprint.none(), (conn, token) -> pay(conn, key, token));
    } catch (Exception e) {
      throw new CompletionException(e);
    }
  }

  /** The business step: one payment row, whose id the transaction reads back. */
  private byte[] pay(Connection c, IdempotencyKey key, long token) throws SQLException {
    try (PreparedStatement s =
        c.prepareStatement(
            "INSERT INTO bench_payments (idem_key, token) VALUES (?, ?) RETURNING id")) {
      s.setString(1, key.key());
      s.setLong(2, token);
      try (ResultSet r = s.executeQuery()) {
        if (!r.next()) {
          throw new SQLException("the payment's INSERT returned no id");
        }
      }
    }
    return response;
  }

  private CompletableFuture<Settlement> standard(IdempotencyKey key) {
    return BenchTarget.acquireThenComplete(
        store.acquire(key, Fingerprint.none(), inProgress, retention),
        token -> store.complete(key, token, response));
  }

  /**
   * What the database holds after the run (nothing in flight), against what was acknowledged: null
   * if every acknowledged operation left exactly one completed key and, in the transactional mode,
   * exactly one payment, and nothing else was written; else what is wrong. An operation that failed
   * ({@code failed}) may or may not have committed (the outcome of a failed commit is unknown), and
   * in the standard mode may have left its key in progress.
   */
  String check(long failed) throws SQLException {
    long acked = acknowledged.get();
    long keys = count("SELECT count(*) FROM idem_keys WHERE state = 'completed'");
    long records = count("SELECT count(*) FROM idem_keys");
    long payments = count("SELECT count(*) FROM bench_payments");
    boolean ok =
        keys >= acked
            && records <= acked + failed
            && (mode == Mode.transactional
                ? payments == keys && records == keys // never in progress outside a transaction
                : payments == 0);
    return ok
        ? null
        : String.format(
            "%d acknowledged operations (%d failed) but %d completed keys, %d key records and %d"
                + " payments",
            acked, failed, keys, records, payments);
  }

  /** The counts {@link #check} compares, for the report. */
  String counts() throws SQLException {
    return String.format(
        "%d acknowledged, %d completed keys, %d payments",
        acknowledged.get(),
        count("SELECT count(*) FROM idem_keys WHERE state = 'completed'"),
        count("SELECT count(*) FROM bench_payments"));
  }

  private long count(String sql) throws SQLException {
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  @Override
  public void close() {
    if (workers != null) {
      workers.shutdownNow();
      try {
        workers.awaitTermination(10, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    store.close(); // the pool stays the caller's
  }
}
