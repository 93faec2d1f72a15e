package io.idem.kafka.postgres;

import io.idem.kafka.RecordKeys;
import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.kafka.spi.ReceiverStore;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.postgres.PostgresKeyStore;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;

/**
 * The Kafka receiver's store on PostgreSQL, over any {@link DataSource} (a pool such as HikariCP in
 * practice), in the application's own database: each partition's claim epoch and committed position
 * in {@code idem_kafka_offsets} ({@link #migrate}), and each batch of records applied in one
 * transaction.
 *
 * <ul>
 *   <li>{@link #claim}: one statement that raises the partition's epoch (1 for a new partition,
 *       position -1). It waits for a batch in flight on the partition to commit or roll back.
 *   <li>{@link #process}: one transaction. It locks the partition's row and checks the epoch
 *       (another: {@link BatchOutcome.Fenced}, nothing applied); skips the records below the
 *       position (committed before); runs the {@link PostgresRecordHandler} on each other record,
 *       in offset order; and sets the position after the last record applied. A handler's exception
 *       rolls the transaction back, and the records before it run again in a new one that commits
 *       them without it ({@link BatchOutcome.Stopped}): records do not pay for a savepoint each,
 *       and a failure pays for its batch twice.
 *   <li>Records with a key ({@link Builder#recordKeys}): the key is decided and completed through
 *       {@link PostgresKeyStore#inOpenTransaction}, in the same transaction; a key completed before
 *       makes the record a duplicate (the handler does not run), and one another owner holds past
 *       the lock timeout stops the batch without counting an attempt.
 *   <li>{@link #skip}: one transaction that checks the epoch and moves the position past the
 *       record, with no effect. A key it has is left alone: a key is only written when its record's
 *       effect commits.
 * </ul>
 *
 * <p>So a record's effect, its key's completion and the offset after it commit together or not at
 * all, and a consumer that lost the partition cannot commit: its epoch is stale in the row it must
 * lock.
 *
 * <p><b>Threads.</b> The calls do not block: their JDBC work runs on the store's executor (its own
 * fixed pool of {@link Builder#threads} with a queue of {@link Builder#queueCapacity}, or one given
 * with {@link Builder#executor}), where the handler runs too, and their stages complete on its
 * threads. A batch holds a connection of the data source for its whole transaction. {@link
 * #migrate} runs on the calling thread. Thread-safe.
 *
 * <p><b>Errors.</b> Bad arguments (records of another partition, offsets not ascending) fail the
 * stage with {@link IllegalArgumentException}, nothing sent. Every failure of the database, the
 * driver or the pool (an {@link SQLException}, a statement past its timeout, a full queue, a closed
 * store) fails it with {@link ReceiverStoreException}: the outcome is unknown, never a yes.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
public final class PostgresReceiverStore<K, V> implements ReceiverStore<K, V>, AutoCloseable {

  /** Default {@link Builder#statementTimeout}: 10 s. */
  public static final Duration DEFAULT_STATEMENT_TIMEOUT = Duration.ofSeconds(10);

  /** Default {@link Builder#lockTimeout}: 5 s. */
  public static final Duration DEFAULT_LOCK_TIMEOUT = Duration.ofSeconds(5);

  /** Default {@link Builder#threads}: 8. */
  public static final int DEFAULT_THREADS = 8;

  /** Default {@link Builder#queueCapacity}: 1024 calls. */
  public static final int DEFAULT_QUEUE_CAPACITY = 1024;

  /** Default {@link Builder#keyRetention}: 24 h. */
  public static final Duration DEFAULT_KEY_RETENTION = Duration.ofHours(24);

  /** Anything done on a connection in one transaction. */
  @FunctionalInterface
  private interface TransactionCall<T> {
    T apply(Connection c) throws SQLException;
  }

  private final DataSource dataSource;
  private final Executor executor;
  private final @Nullable ExecutorService ownExecutor; // null when the executor was given
  private final @Nullable PostgresKeyStore keyStore; // null when records have no keys
  private final BatchTransaction.Settings<K, V> settings;
  private final long statementTimeoutMs;
  private volatile boolean closed;

  private PostgresReceiverStore(Builder<K, V> b) {
    this.dataSource = b.dataSource;
    this.statementTimeoutMs = b.statementTimeout.toMillis();
    if (b.executor != null) {
      this.executor = b.executor;
      this.ownExecutor = null;
    } else {
      AtomicInteger n = new AtomicInteger();
      this.ownExecutor =
          new ThreadPoolExecutor(
              b.threads,
              b.threads,
              0,
              TimeUnit.MILLISECONDS,
              new ArrayBlockingQueue<>(b.queueCapacity),
              r -> {
                Thread t = new Thread(r, "idem-kafka-postgres-" + n.incrementAndGet());
                t.setDaemon(true);
                return t;
              });
      this.executor = ownExecutor;
    }
    this.keyStore =
        b.recordKeys == null
            ? null
            : PostgresKeyStore.builder(b.dataSource)
                // Only inOpenTransaction is used, on the batch's thread; the pool is for purging.
                .executor(executor)
                .lockTimeout(b.lockTimeout)
                .maxRetention(max(b.keyRetention, PostgresKeyStore.DEFAULT_MAX_RETENTION))
                .retention(b.keyRetention)
                .build();
    this.settings =
        new BatchTransaction.Settings<>(
            new OffsetCalls(statementTimeoutMs, b.lockTimeout.toMillis()),
            b.handler,
            b.recordKeys == null ? RecordKeys.offsets() : b.recordKeys,
            keyStore,
            b.keyScope);
  }

  /**
   * A builder over {@code dataSource} (the caller keeps and closes it) and the handler that applies
   * each record.
   */
  public static <K, V> Builder<K, V> builder(
      DataSource dataSource, PostgresRecordHandler<K, V> handler) {
    return new Builder<>(dataSource, handler);
  }

  /**
   * Creates or upgrades the store's table ({@code idem_kafka_offsets}, recorded in {@code
   * idem_kafka_schema}), and the key store's schema if records have keys, each in one transaction.
   * Safe to call from every process at startup: concurrent calls wait for each other, and a schema
   * that is up to date is left alone.
   *
   * @return the receiver schema's version before the call (0 for none)
   * @throws IllegalStateException the database's schema is newer than this library
   * @throws ReceiverStoreException the database failed; nothing was applied
   */
  public int migrate() {
    if (keyStore != null) {
      try {
        keyStore.migrate();
      } catch (KeyStoreException e) {
        throw new ReceiverStoreException(
            null, null, "migrating the key store's schema failed: " + e.getMessage(), e);
      }
    }
    try (Connection c = dataSource.getConnection()) {
      return OffsetSchema.migrate(c);
    } catch (SQLException e) {
      throw new ReceiverStoreException(
          null, null, "migrating the schema failed (nothing was applied): " + e.getMessage(), e);
    }
  }

  @Override
  public CompletionStage<PartitionClaim> claim(String group, TopicPartition partition) {
    String bad = check(group, partition);
    if (bad != null) {
      return CompletableFuture.failedFuture(new IllegalArgumentException(bad));
    }
    return call(
        group,
        partition,
        "claim",
        c -> {
          OffsetCalls.Row row = settings.calls().claim(c, group, partition);
          return new PartitionClaim(row.epoch(), row.position());
        });
  }

  @Override
  public CompletionStage<BatchOutcome> process(
      String group, TopicPartition partition, long epoch, List<ConsumerRecord<K, V>> records) {
    String bad = check(group, partition);
    if (bad == null) {
      bad = checkRecords(partition, records);
    }
    if (bad != null) {
      return CompletableFuture.failedFuture(new IllegalArgumentException(bad));
    }
    List<ConsumerRecord<K, V>> batch = List.copyOf(records);
    return call(
        group,
        partition,
        "process",
        c -> new BatchTransaction<>(settings, c, group, partition, epoch).process(batch));
  }

  @Override
  public CompletionStage<BatchOutcome> skip(
      String group, TopicPartition partition, long epoch, ConsumerRecord<K, V> record) {
    String bad = check(group, partition);
    if (bad == null) {
      bad = record == null ? "record must not be null" : checkRecords(partition, List.of(record));
    }
    if (bad != null) {
      return CompletableFuture.failedFuture(new IllegalArgumentException(bad));
    }
    return call(
        group,
        partition,
        "skip",
        c -> new BatchTransaction<>(settings, c, group, partition, epoch).skip(record));
  }

  /**
   * Stops the store's own executor (waiting up to the statement timeout for calls in flight) and
   * its key store; calls after this fail with {@link ReceiverStoreException}. Leaves the data
   * source and a given executor open.
   */
  @Override
  public void close() {
    closed = true;
    if (keyStore != null) {
      keyStore.close();
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

  private static @Nullable String check(String group, TopicPartition partition) {
    if (group == null || group.isEmpty()) {
      return "group must not be null or empty";
    }
    if (partition == null) {
      return "partition must not be null";
    }
    return null;
  }

  private static <K, V> @Nullable String checkRecords(
      TopicPartition partition, List<ConsumerRecord<K, V>> records) {
    if (records == null) {
      return "records must not be null";
    }
    long last = -1;
    for (ConsumerRecord<K, V> r : records) {
      if (r == null) {
        return "records must not contain null";
      }
      if (!r.topic().equals(partition.topic()) || r.partition() != partition.partition()) {
        return "a record of " + r.topic() + "-" + r.partition() + " in a batch of " + partition;
      }
      if (r.offset() <= last) {
        return "offsets must ascend: " + r.offset() + " after " + last;
      }
      last = r.offset();
    }
    return null;
  }

  /**
   * Runs {@code op} on the executor in one transaction on a connection of the data source: commits
   * if it returns, rolls back if it throws; every failure is a {@link ReceiverStoreException}.
   */
  private <T> CompletableFuture<T> call(
      String group, TopicPartition tp, String what, TransactionCall<T> op) {
    CompletableFuture<T> out = new CompletableFuture<>();
    if (closed) {
      out.completeExceptionally(
          new ReceiverStoreException(
              group, tp, what + " refused: the store is closed; nothing was sent", null));
      return out;
    }
    try {
      executor.execute(
          () -> {
            try {
              out.complete(inTransaction(op));
            } catch (SQLException e) {
              out.completeExceptionally(
                  new ReceiverStoreException(
                      group,
                      tp,
                      "PostgreSQL failed during "
                          + what
                          + " (SQLSTATE "
                          + e.getSQLState()
                          + ": "
                          + e.getMessage()
                          + "); the outcome is unknown",
                      e));
            } catch (RuntimeException | Error e) {
              out.completeExceptionally(
                  new ReceiverStoreException(
                      group, tp, what + " failed: " + e + "; the outcome is unknown", e));
              if (e instanceof Error err) {
                throw err;
              }
            }
          });
    } catch (RejectedExecutionException e) {
      out.completeExceptionally(
          new ReceiverStoreException(
              group,
              tp,
              what + " refused: the store's executor is full or shut down; nothing was sent",
              e));
    }
    return out;
  }

  private <T> T inTransaction(TransactionCall<T> op) throws SQLException {
    try (Connection c = dataSource.getConnection()) {
      boolean autoCommit = c.getAutoCommit();
      c.setAutoCommit(false);
      try {
        T value = op.apply(c);
        c.commit();
        return value;
      } catch (SQLException | RuntimeException | Error e) {
        try {
          c.rollback();
        } catch (SQLException r) {
          e.addSuppressed(r);
        }
        throw e;
      } finally {
        try {
          c.setAutoCommit(autoCommit);
        } catch (SQLException e) {
          // The connection broke; its transaction has ended either way. The pool discards it.
        }
      }
    }
  }

  private static Duration max(Duration a, Duration b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  /** Builds a {@link PostgresReceiverStore}. Not thread-safe. */
  public static final class Builder<K, V> {
    private final DataSource dataSource;
    private final PostgresRecordHandler<K, V> handler;
    private @Nullable RecordKeys<K, V> recordKeys;
    private @Nullable String keyScope;
    private Duration keyRetention = DEFAULT_KEY_RETENTION;
    private @Nullable Executor executor;
    private int threads = DEFAULT_THREADS;
    private int queueCapacity = DEFAULT_QUEUE_CAPACITY;
    private Duration statementTimeout = DEFAULT_STATEMENT_TIMEOUT;
    private Duration lockTimeout = DEFAULT_LOCK_TIMEOUT;

    private Builder(DataSource dataSource, PostgresRecordHandler<K, V> handler) {
      if (dataSource == null || handler == null) {
        throw new IllegalArgumentException("dataSource and handler must not be null");
      }
      this.dataSource = dataSource;
      this.handler = handler;
    }

    /**
     * Which key each record has beyond its offset (default {@link RecordKeys#offsets()}: none, and
     * no key records are kept). With keys, a record whose key was completed before is a duplicate;
     * {@link #migrate} then also creates the key store's schema (idem-keys-postgres).
     */
    public Builder<K, V> recordKeys(RecordKeys<K, V> keys) {
      if (keys == null) {
        throw new IllegalArgumentException("recordKeys must not be null");
      }
      this.recordKeys = keys;
      return this;
    }

    /**
     * The scope of the records' keys (default {@code "kafka/" + group}, so that each consumer group
     * applies a message once). Give one to share keys between groups.
     */
    public Builder<K, V> keyScope(String scope) {
      new IdempotencyKey(scope, "k"); // checks the scope's length and characters
      this.keyScope = scope;
      return this;
    }

    /** How long a record's key is kept after its record committed. Default 24 h. */
    public Builder<K, V> keyRetention(Duration d) {
      this.keyRetention = within("keyRetention", d, Duration.ofDays(3650));
      return this;
    }

    /**
     * Runs the calls (and the handler) on {@code executor} (the store leaves it open) instead of a
     * pool of its own; their stages complete on its threads. It should not run more calls at once
     * than the data source has connections.
     */
    public Builder<K, V> executor(Executor executor) {
      if (executor == null) {
        throw new IllegalArgumentException("executor must not be null");
      }
      this.executor = executor;
      return this;
    }

    /** Threads of the store's own pool (when no executor is given). Default 8. */
    public Builder<K, V> threads(int n) {
      if (n < 1 || n > 1024) {
        throw new IllegalArgumentException("threads must be in [1, 1024], got " + n);
      }
      this.threads = n;
      return this;
    }

    /**
     * Calls that may wait for a thread of the store's own pool; beyond them a call fails at once
     * with {@link ReceiverStoreException}, nothing sent. Default 1024.
     */
    public Builder<K, V> queueCapacity(int n) {
      if (n < 1 || n > 1 << 20) {
        throw new IllegalArgumentException("queueCapacity must be in [1, 2^20], got " + n);
      }
      this.queueCapacity = n;
      return this;
    }

    /**
     * How long one statement may run before PostgreSQL cancels it: the store's own (a claim's wait
     * for the batch in flight, a batch's wait for its partition's row included; the JDBC timeout
     * has whole seconds, this is rounded up for them) and the handler's. A handler's statement
     * cancelled is its record's failed attempt; the store's, a {@link ReceiverStoreException}.
     * Default 10 s.
     */
    public Builder<K, V> statementTimeout(Duration d) {
      this.statementTimeout = within("statementTimeout", d, Duration.ofHours(1));
      return this;
    }

    /**
     * How long a statement of a batch waits for a lock (a record's key another transaction holds
     * included) before it fails. Default 5 s.
     */
    public Builder<K, V> lockTimeout(Duration d) {
      this.lockTimeout = within("lockTimeout", d, Duration.ofHours(1));
      return this;
    }

    /** The store. */
    public PostgresReceiverStore<K, V> build() {
      return new PostgresReceiverStore<>(this);
    }

    private static Duration within(String what, Duration d, Duration max) {
      if (d == null || d.toMillis() < 1 || d.compareTo(max) > 0) {
        throw new IllegalArgumentException(what + " must be in [1 ms, " + max + "], got " + d);
      }
      return d;
    }
  }
}
