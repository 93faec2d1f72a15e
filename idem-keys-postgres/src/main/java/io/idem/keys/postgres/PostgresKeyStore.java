package io.idem.keys.postgres;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyFencedException;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyMismatchException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.StoredFailureException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.NoEffect;
import io.idem.keys.spi.Settlement;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jspecify.annotations.Nullable;

/**
 * The key store on PostgreSQL, over any {@link DataSource} (a pool such as HikariCP in practice).
 * Each transition is one call of a function of the store's schema ({@link #migrate}), one round
 * trip and one atomic step:
 *
 * <ul>
 *   <li>Deadlines and expiry are decided by the database's clock ({@code statement_timestamp()}),
 *       never this host's.
 *   <li>Tokens come from a sequence, drawn while the acquire holds the key's advisory lock, so they
 *       grow with every change of hands of a key, across takeovers, expiry, purges and restarts of
 *       the server; a stale owner can never hold a later record's token.
 *   <li>{@code complete}, {@code release} and {@code renew} apply only while the token owns the key
 *       in progress, and answer {@link Settlement.Fenced} with the current owner's token (0 if
 *       none) otherwise, changing nothing.
 *   <li>Every call forces {@code synchronous_commit} on for its transaction: a token or a
 *       completion that a crash of the server could take back would let two owners hold one token.
 *   <li>A record whose retention has ended counts as absent: an acquire replaces it, and {@link
 *       #purgeExpired} (run every {@link Builder#purgeEvery}) deletes such records in bounded
 *       batches.
 * </ul>
 *
 * <p><b>Transactional mode.</b> {@link #inTransaction} acquires the key, runs the business step and
 * records its outcome in one transaction on the caller's connection: both commit or neither does,
 * so there is no moment at which the step is done but not recorded. A concurrent duplicate waits on
 * the key's lock (at most {@link Builder#lockTimeout}), then replays the committed response, or
 * runs the step itself if the first transaction rolled back.
 *
 * <p><b>Threads.</b> The {@link KeyStore} methods do not block: their JDBC calls run on the store's
 * executor (its own fixed pool of {@link Builder#threads} with a bounded queue, or one given with
 * {@link Builder#executor}), and their stages complete on its threads, so a callback that blocks
 * holds up a store thread. {@link #inTransaction}, {@link #migrate} and {@link #purgeExpired} run
 * on the calling thread. Thread-safe.
 *
 * <p><b>Errors.</b> Bad input (a part out of bounds, text PostgreSQL cannot store as given) is an
 * {@link IllegalArgumentException}, before anything is sent. Every failure of the database, the
 * driver or the pool (an {@link SQLException}, a statement that ran past {@link
 * Builder#statementTimeout}, a full queue, a closed store) is a {@link KeyStoreException}: the
 * outcome is unknown, never a yes, and retrying with the same key is safe.
 */
public final class PostgresKeyStore implements KeyStore<NoEffect>, AutoCloseable {

  /** Default {@link Builder#statementTimeout}: 5 s. */
  public static final Duration DEFAULT_STATEMENT_TIMEOUT = Duration.ofSeconds(5);

  /** Default {@link Builder#lockTimeout}: 5 s. */
  public static final Duration DEFAULT_LOCK_TIMEOUT = Duration.ofSeconds(5);

  /** Default {@link Builder#threads}: 8. */
  public static final int DEFAULT_THREADS = 8;

  /** Default {@link Builder#queueCapacity}: 1024 calls. */
  public static final int DEFAULT_QUEUE_CAPACITY = 1024;

  /** Default {@link Builder#maxResponseBytes}: 64 KiB, as on Idem. */
  public static final int DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

  /** Largest {@link Builder#maxResponseBytes}: 64 MiB. */
  public static final int MAX_RESPONSE_BYTES_LIMIT = 64 * 1024 * 1024;

  /** Default {@link Builder#maxRetention}: 7 days, as on Idem. */
  public static final Duration DEFAULT_MAX_RETENTION = Duration.ofDays(7);

  /** Default {@link Builder#purgeEvery}: 1 minute. */
  public static final Duration DEFAULT_PURGE_EVERY = Duration.ofMinutes(1);

  /** Default {@link Builder#purgeBatch}: 1000 records per statement. */
  public static final int DEFAULT_PURGE_BATCH = 1000;

  /** Longest fingerprint, in bytes (the schema checks it too). */
  public static final int MAX_FINGERPRINT_BYTES = 64;

  private static final System.Logger LOG = System.getLogger(PostgresKeyStore.class.getName());

  /** Anything to be done with a connection. */
  @FunctionalInterface
  private interface SqlCall<T> {
    T apply(Connection c) throws SQLException;
  }

  private final DataSource dataSource;
  private final Executor executor;
  private final @Nullable ExecutorService ownExecutor; // null when the executor was given
  private final @Nullable ScheduledExecutorService purger; // null when purging is off
  private final KeyCalls calls; // on the store's own connections: JDBC query timeouts
  private final KeyTransaction.Settings transactions;
  private final long statementTimeoutMs;
  private final CallArguments arguments;
  private final int purgeBatch;
  private volatile boolean closed;

  private PostgresKeyStore(Builder b) {
    this.dataSource = b.dataSource;
    this.statementTimeoutMs = b.statementTimeout.toMillis();
    this.arguments = new CallArguments(b.maxRetention.toMillis(), b.maxResponseBytes);
    this.purgeBatch = b.purgeBatch;
    // The JDBC timeout has whole seconds: round up, so that the server's lock timeout (exact)
    // comes first.
    this.calls = new KeyCalls((int) Math.max(1, (statementTimeoutMs + 999) / 1000));
    // On the caller's connection, the caller's timeouts apply; the wait for the key has its own.
    this.transactions =
        new KeyTransaction.Settings(
            new KeyCalls(0),
            b.lockTimeout.toMillis(),
            b.retention.toMillis(),
            b.maxResponseBytes,
            List.copyOf(b.storedFailures));
    if (b.executor != null) {
      this.executor = b.executor;
      this.ownExecutor = null;
    } else {
      this.ownExecutor =
          new ThreadPoolExecutor(
              b.threads,
              b.threads,
              0,
              TimeUnit.MILLISECONDS,
              new ArrayBlockingQueue<>(b.queueCapacity),
              daemons("idem-keys-postgres-"));
      this.executor = ownExecutor;
    }
    if (b.purgeEvery.isZero()) {
      this.purger = null;
    } else {
      this.purger =
          Executors.newSingleThreadScheduledExecutor(daemons("idem-keys-postgres-purge-"));
      long ms = b.purgeEvery.toMillis();
      purger.scheduleWithFixedDelay(this::purgeInBackground, ms, ms, TimeUnit.MILLISECONDS);
    }
  }

  /** A builder over {@code dataSource} (the caller keeps and closes it). */
  public static Builder builder(DataSource dataSource) {
    return new Builder(dataSource);
  }

  // ---- schema ----

  /**
   * Creates or upgrades the store's tables and functions (the versioned DDL files {@code
   * io/idem/keys/postgres/V<n>__*.sql} in this jar, recorded in {@code idem_keys_schema}), in one
   * transaction. Safe to call from every process at startup: concurrent calls wait for each other,
   * and a schema that is up to date is left alone.
   *
   * @return the schema version before the call (0 for none)
   * @throws IllegalStateException the database's encoding is not UTF8, or its key schema is newer
   *     than this library
   * @throws KeyStoreException the database failed; nothing was applied
   */
  public int migrate() {
    try (Connection c = dataSource.getConnection()) {
      return KeySchema.migrate(c);
    } catch (SQLException e) {
      throw KeyCalls.failure(null, "migrate", e);
    }
  }

  // ---- the KeyStore SPI ----

  @Override
  public CompletionStage<Acquisition> acquire(
      IdempotencyKey key, Fingerprint fingerprint, Duration inProgressTimeout, Duration retention) {
    byte[] fp;
    long timeoutMs;
    long keepMs;
    try {
      CallArguments.checkKey(key);
      fp = CallArguments.fingerprint(fingerprint);
      timeoutMs = arguments.bounded("inProgressTimeout", inProgressTimeout);
      keepMs = arguments.bounded("retention", retention);
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e);
    }
    return call(
        key, "acquire", c -> calls.acquire(c, key, fp, timeoutMs, keepMs, statementTimeoutMs));
  }

  @Override
  public CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response) {
    try {
      CallArguments.checkKey(key);
      arguments.checkResponse(response);
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e);
    }
    return call(key, "complete", c -> calls.complete(c, key, token, response));
  }

  @Override
  public CompletionStage<Settlement> release(IdempotencyKey key, long token) {
    try {
      CallArguments.checkKey(key);
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e);
    }
    return call(key, "release", c -> calls.release(c, key, token));
  }

  @Override
  public CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension) {
    long extensionMs;
    try {
      CallArguments.checkKey(key);
      extensionMs = arguments.bounded("extension", extension);
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e);
    }
    return call(key, "renew", c -> calls.renew(c, key, token, extensionMs));
  }

  // ---- transactional mode ----

  /**
   * Runs {@code work} once for {@code key}, in one transaction on {@code connection} with the key's
   * acquisition and its completion, or replays the outcome stored for it. The transaction begins
   * here and ends here (the connection must not be inside one; its auto-commit mode is restored on
   * return):
   *
   * <ol>
   *   <li>Decide on the key, holding its lock (and its record's row, if it has one) until the
   *       transaction ends. A duplicate running at the same time waits here, at most {@link
   *       Builder#lockTimeout}.
   *   <li>Completed before: roll back, and replay the stored response (or the stored failure).
   *       Another fingerprint, or an owner of the standard mode holding the key: roll back, and
   *       throw.
   *   <li>Free (new, expired, or its owner's deadline passed): run {@code work} on {@code
   *       connection} with a new token, write the record completed with its response, commit. No
   *       other transaction ever sees the key in progress. If it throws, everything it wrote is
   *       rolled back with the acquisition, so a retry runs it again; unless the failure's type was
   *       given to {@link Builder#storeFailures}: then the work's writes are rolled back to a
   *       savepoint, the failure is stored as the key's outcome and committed, and it is thrown now
   *       and replayed to every retry as {@link StoredFailureException}, as {@link
   *       IdempotentExecutor} does.
   * </ol>
   *
   * <p>Timeouts: the wait for the key is bounded by {@link Builder#lockTimeout}; the store's own
   * statements otherwise wait on nothing but short row locks. Everything runs under the caller's
   * connection settings (the driver's {@code socketTimeout} bounds a server that stops answering,
   * {@code statement_timeout} a slow work); {@link Builder#statementTimeout} applies to the {@link
   * KeyStore} calls only, whose connections are the store's.
   *
   * <p>Run it at READ COMMITTED (PostgreSQL's default): at REPEATABLE READ or SERIALIZABLE a
   * duplicate that waited fails with a serialization error ({@link KeyStoreException}) instead of
   * replaying. The stored response is the executor's form, so the key also replays through an
   * {@link IdempotentExecutor} over this store.
   *
   * @return the work's response, from this run or replayed
   * @throws KeyMismatchException the key was used with another fingerprint; nothing ran
   * @throws KeyInProgressException another transaction held the key past the lock timeout, or an
   *     owner of the standard mode holds it; nothing ran, nothing was written
   * @throws StoredFailureException a failure stored as the key's outcome, replayed
   * @throws KeyFencedException the key changed hands during the transaction, which can only happen
   *     if its locks were let go early; nothing was written
   * @throws KeyStoreException the database failed; if at the commit, the outcome is unknown; a
   *     retry with the same key is safe. This includes a connection that broke while the work ran
   *     (the work's SQLException, SQLSTATE class 08 or 57P, is the cause): nothing committed
   * @throws IllegalArgumentException a bad part, or a response over {@link
   *     Builder#maxResponseBytes} (nothing was written)
   * @throws IllegalStateException the connection is inside a transaction; or the work returned
   *     null, ended the transaction itself, or went on after one of its statements failed (nothing
   *     of the key was written)
   * @throws Exception what the work threw (its writes rolled back, or its failure stored)
   */
  public byte[] inTransaction(
      Connection connection, IdempotencyKey key, Fingerprint fingerprint, TransactionalWork work)
      throws Exception {
    if (connection == null || work == null) {
      throw new IllegalArgumentException("connection and work must not be null");
    }
    CallArguments.checkKey(key);
    byte[] fp = CallArguments.fingerprint(fingerprint);
    return KeyTransaction.run(transactions, connection, key, fp, work);
  }

  /**
   * Runs {@code work} once for {@code key} inside the transaction the caller has open on {@code
   * connection} (auto-commit off), which this neither begins nor ends: the key's decision, the
   * work's writes and the key's completion join that transaction, and commit or roll back with it.
   * For a caller that commits more than one key's work, or writes of its own, in one transaction
   * (the Kafka receiver commits a batch of records with the partition's offset).
   *
   * <ol>
   *   <li>Decide on the key, holding its lock (and its record's row, if it has one) until the
   *       caller's transaction ends. A duplicate running at the same time waits, at most {@link
   *       Builder#lockTimeout}.
   *   <li>Completed before: return the stored response; {@code work} does not run.
   *   <li>Free: run {@code work} on {@code connection} with a new token, and write the record
   *       completed with its response; others see it once the caller commits.
   * </ol>
   *
   * <p>On an exception nothing of the key was written, but the caller's transaction may hold the
   * key's lock and the work's writes, or be aborted: the caller rolls it back, or back to a
   * savepoint taken before this call to go on with the rest. Failures are never stored here ({@link
   * Builder#storeFailures} is for {@link #inTransaction}): a failed work runs again on a retry.
   * Timeouts and isolation as for {@link #inTransaction}.
   *
   * @return the work's response, from this run or the stored one
   * @throws KeyMismatchException the key was used with another fingerprint; nothing ran
   * @throws KeyInProgressException another transaction held the key past the lock timeout, or an
   *     owner of the standard mode holds it; nothing ran
   * @throws StoredFailureException a failure that {@link #inTransaction} stored, replayed
   * @throws KeyFencedException the key changed hands during the transaction, which can only happen
   *     if its locks were let go early
   * @throws KeyStoreException the database failed, or the connection broke while the work ran
   * @throws IllegalArgumentException a bad part, or a response over {@link
   *     Builder#maxResponseBytes}
   * @throws IllegalStateException the connection is in auto-commit mode; or the work returned null,
   *     ended the transaction, or went on after one of its statements failed
   * @throws Exception what the work threw
   */
  public byte[] inOpenTransaction(
      Connection connection, IdempotencyKey key, Fingerprint fingerprint, TransactionalWork work)
      throws Exception {
    if (connection == null || work == null) {
      throw new IllegalArgumentException("connection and work must not be null");
    }
    CallArguments.checkKey(key);
    byte[] fp = CallArguments.fingerprint(fingerprint);
    return KeyTransaction.joined(transactions, connection, key, fp, work);
  }

  // ---- retention ----

  /**
   * Deletes up to {@link Builder#purgeBatch} records whose retention has ended, oldest first (one
   * statement; records another transaction holds are skipped). Such records already count as
   * absent; this only gives their space back.
   *
   * @return how many were deleted
   * @throws KeyStoreException the database failed
   */
  public int purgeExpired() {
    try {
      return withConnection(c -> calls.purge(c, purgeBatch));
    } catch (SQLException e) {
      throw KeyCalls.failure(null, "purge", e);
    }
  }

  private void purgeInBackground() {
    try {
      while (!closed && purgeExpired() == purgeBatch) {
        // a full batch: more may be due
      }
    } catch (RuntimeException e) {
      // Retried at the next interval; records past their retention count as absent meanwhile.
      LOG.log(System.Logger.Level.WARNING, "purging expired idempotency keys failed", e);
    }
  }

  /**
   * Stops the purge and the store's own executor (waiting up to the statement timeout for calls in
   * flight); calls after this fail with {@link KeyStoreException}. Leaves the data source and a
   * given executor open.
   */
  @Override
  public void close() {
    closed = true;
    if (purger != null) {
      purger.shutdownNow();
    }
    if (ownExecutor != null) {
      ownExecutor.shutdown();
      try {
        if (!ownExecutor.awaitTermination(statementTimeoutMs + 1000, TimeUnit.MILLISECONDS)) {
          ownExecutor.shutdownNow();
        }
      } catch (InterruptedException e) {
        ownExecutor.shutdownNow();
        Thread.currentThread().interrupt();
      }
    }
  }

  // ---- plumbing ----

  /** Runs {@code op} on the executor with a connection; translates every failure. */
  private <T> CompletableFuture<T> call(IdempotencyKey key, String what, SqlCall<T> op) {
    CompletableFuture<T> out = new CompletableFuture<>();
    if (closed) {
      out.completeExceptionally(
          new KeyStoreException(
              key, what + " refused: the store is closed; nothing was sent", null));
      return out;
    }
    try {
      executor.execute(
          () -> {
            try {
              out.complete(withConnection(op));
            } catch (SQLException e) {
              out.completeExceptionally(KeyCalls.failure(key, what, e));
            } catch (RuntimeException | Error e) {
              out.completeExceptionally(
                  new KeyStoreException(key, what + " failed unexpectedly: " + e, e));
              if (e instanceof Error err) {
                throw err;
              }
            }
          });
    } catch (RejectedExecutionException e) {
      out.completeExceptionally(
          new KeyStoreException(
              key,
              what + " refused: the store's executor is full or shut down; nothing was sent",
              e));
    }
    return out;
  }

  /** Runs {@code op} on a connection of the data source, committing if it is not auto-commit. */
  private <T> T withConnection(SqlCall<T> op) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      boolean manual = !c.getAutoCommit();
      try {
        T value = op.apply(c);
        if (manual) {
          c.commit();
        }
        return value;
      } catch (SQLException | RuntimeException e) {
        if (manual) {
          try {
            c.rollback();
          } catch (SQLException r) {
            e.addSuppressed(r);
          }
        }
        throw e;
      }
    }
  }

  /** Daemon threads named {@code prefix + n}. */
  private static ThreadFactory daemons(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /** Builds a {@link PostgresKeyStore}. Not thread-safe. */
  public static final class Builder {
    private final DataSource dataSource;
    private @Nullable Executor executor;
    private int threads = DEFAULT_THREADS;
    private int queueCapacity = DEFAULT_QUEUE_CAPACITY;
    private Duration statementTimeout = DEFAULT_STATEMENT_TIMEOUT;
    private Duration lockTimeout = DEFAULT_LOCK_TIMEOUT;
    private Duration retention = IdempotentExecutor.DEFAULT_RETENTION;
    private Duration maxRetention = DEFAULT_MAX_RETENTION;
    private int maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
    private Duration purgeEvery = DEFAULT_PURGE_EVERY;
    private int purgeBatch = DEFAULT_PURGE_BATCH;
    private final List<Class<? extends Throwable>> storedFailures = new ArrayList<>();

    private Builder(DataSource dataSource) {
      if (dataSource == null) {
        throw new IllegalArgumentException("dataSource must not be null");
      }
      this.dataSource = dataSource;
    }

    /**
     * Runs the {@link KeyStore} calls on {@code executor} (the store leaves it open) instead of a
     * pool of its own. Their stages complete on its threads. It should not run more calls at once
     * than the data source has connections.
     */
    public Builder executor(Executor executor) {
      if (executor == null) {
        throw new IllegalArgumentException("executor must not be null");
      }
      this.executor = executor;
      return this;
    }

    /** Threads of the store's own pool (when no executor is given). Default 8. */
    public Builder threads(int n) {
      if (n < 1 || n > 1024) {
        throw new IllegalArgumentException("threads must be in [1, 1024], got " + n);
      }
      this.threads = n;
      return this;
    }

    /**
     * Calls that may wait for a thread of the store's own pool; beyond them a call fails at once
     * with {@link KeyStoreException}, nothing sent. Default 1024.
     */
    public Builder queueCapacity(int n) {
      if (n < 1 || n > 1 << 20) {
        throw new IllegalArgumentException("queueCapacity must be in [1, 2^20], got " + n);
      }
      this.queueCapacity = n;
      return this;
    }

    /**
     * How long one statement of a {@link KeyStore} call may run (including its wait for a key
     * another transaction holds) before the driver cancels it: {@link KeyStoreException}. Not for
     * {@link #inTransaction}, which runs on the caller's connection and timeouts. The JDBC timeout
     * has whole seconds; this is rounded up. Default 5 s. The data source's own timeouts (the
     * pool's connection timeout, the driver's {@code socketTimeout}) bound getting a connection and
     * a server that stopped answering.
     */
    public Builder statementTimeout(Duration d) {
      this.statementTimeout = within("statementTimeout", d, Duration.ofHours(1));
      return this;
    }

    /**
     * How long {@link #inTransaction} waits for a key that another transaction holds before it
     * answers {@link KeyInProgressException}. Default 5 s.
     */
    public Builder lockTimeout(Duration d) {
      this.lockTimeout = within("lockTimeout", d, Duration.ofHours(1));
      return this;
    }

    /**
     * How long {@link #inTransaction} keeps a key's outcome (the {@link KeyStore} callers pass
     * their own). Default 24 h.
     */
    public Builder retention(Duration d) {
      this.retention = within("retention", d, Duration.ofDays(3650));
      return this;
    }

    /**
     * Longest retention, in-progress timeout and extension a caller may ask for. Default 7 days.
     */
    public Builder maxRetention(Duration d) {
      this.maxRetention = within("maxRetention", d, Duration.ofDays(3650));
      return this;
    }

    /** Largest stored response. Default 64 KiB, at most 64 MiB. */
    public Builder maxResponseBytes(int n) {
      if (n < 1 || n > MAX_RESPONSE_BYTES_LIMIT) {
        throw new IllegalArgumentException(
            "maxResponseBytes must be in [1, " + MAX_RESPONSE_BYTES_LIMIT + "], got " + n);
      }
      this.maxResponseBytes = n;
      return this;
    }

    /** How often a background thread purges expired records; zero turns it off. Default 1 min. */
    public Builder purgeEvery(Duration d) {
      if (d == null || d.isNegative() || (!d.isZero() && d.toMillis() < 1)) {
        throw new IllegalArgumentException("purgeEvery must be zero or at least 1 ms, got " + d);
      }
      this.purgeEvery = d;
      return this;
    }

    /** Records one purge statement deletes at most. Default 1000. */
    public Builder purgeBatch(int n) {
      if (n < 1 || n > 1_000_000) {
        throw new IllegalArgumentException("purgeBatch must be in [1, 10^6], got " + n);
      }
      this.purgeBatch = n;
      return this;
    }

    /**
     * Failures of these types are a transactional work's final outcome: stored and replayed as
     * {@link StoredFailureException}, never run again (as {@link
     * IdempotentExecutor.Builder#storeFailures}). Other failures roll everything back.
     */
    @SafeVarargs
    public final Builder storeFailures(Class<? extends Throwable>... types) {
      for (Class<? extends Throwable> t : types) {
        if (t == null) {
          throw new IllegalArgumentException("storeFailures must not contain null");
        }
        storedFailures.add(t);
      }
      return this;
    }

    /** The store. */
    public PostgresKeyStore build() {
      if (retention.compareTo(maxRetention) > 0) {
        throw new IllegalArgumentException(
            "retention " + retention + " is longer than maxRetention " + maxRetention);
      }
      return new PostgresKeyStore(this);
    }

    private static Duration within(String what, Duration d, Duration max) {
      if (d == null || d.toMillis() < 1 || d.compareTo(max) > 0) {
        throw new IllegalArgumentException(what + " must be in [1 ms, " + max + "], got " + d);
      }
      return d;
    }
  }
}
