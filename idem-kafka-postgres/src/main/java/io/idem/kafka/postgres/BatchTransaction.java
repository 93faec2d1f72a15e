package io.idem.kafka.postgres;

import io.idem.kafka.RecordKeys;
import io.idem.kafka.spi.BatchOutcome;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyFencedException;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.postgres.PostgresKeyStore;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;

/**
 * One batch of a partition's records (or one skipped record) in one transaction on a connection
 * whose auto-commit is off: lock the partition's row, check the epoch, apply each record under a
 * savepoint, advance the position. The handler must not use the savepoint name {@code idem_record}.
 * The caller commits on return, and rolls back on an exception.
 */
final class BatchTransaction<K, V> {

  /** What every batch shares: the store's settings. */
  record Settings<K, V>(
      OffsetCalls calls,
      PostgresRecordHandler<K, V> handler,
      RecordKeys<K, V> recordKeys,
      @Nullable PostgresKeyStore keyStore,
      @Nullable String keyScope) {

    /** The keys' scope for {@code group}: the one given, else one per consumer group. */
    String scopeFor(String group) {
      return keyScope != null ? keyScope : "kafka/" + group;
    }
  }

  // One savepoint per record, by name: the next record's replaces it (RELEASE and SAVEPOINT in one
  // round trip), and the COMMIT releases the last. The driver's setSavepoint/releaseSavepoint
  // take two round trips per record, and a batch measured several times slower with them.
  private static final String SAVEPOINT = "SAVEPOINT idem_record";
  private static final String NEXT_SAVEPOINT =
      "RELEASE SAVEPOINT idem_record; SAVEPOINT idem_record";
  private static final String ROLLBACK_TO_SAVEPOINT = "ROLLBACK TO SAVEPOINT idem_record";

  /** The stored response of a record's key: records have none to replay. */
  private static final byte[] NO_RESPONSE = new byte[0];

  /** How one record went. */
  private enum Kind {
    APPLIED,
    DUPLICATE,
    FAILED
  }

  private record Step(Kind kind, @Nullable Throwable cause, boolean attempt) {
    static final Step APPLIED = new Step(Kind.APPLIED, null, false);
    static final Step DUPLICATE = new Step(Kind.DUPLICATE, null, false);

    static Step failed(Throwable cause, boolean attempt) {
      return new Step(Kind.FAILED, cause, attempt);
    }
  }

  private final Settings<K, V> settings;
  private final Connection c;
  private final String group;
  private final TopicPartition tp;
  private final long epoch;

  BatchTransaction(
      Settings<K, V> settings, Connection c, String group, TopicPartition tp, long epoch) {
    this.settings = settings;
    this.c = c;
    this.group = group;
    this.tp = tp;
    this.epoch = epoch;
  }

  /**
   * Applies {@code records} (offsets ascending) in order: those below the position are skipped,
   * each other one runs under a savepoint; the first that fails is rolled back to it and stops the
   * batch. The position moves past the last record applied.
   *
   * @throws SQLException the store's own statements failed: nothing may be committed
   * @throws KeyStoreException a key's statements failed, or the connection broke
   */
  BatchOutcome process(List<ConsumerRecord<K, V>> records) throws SQLException {
    OffsetCalls.Row row = settings.calls().lock(c, group, tp);
    if (row == null || row.epoch() != epoch) {
      return fenced(row);
    }
    long position = row.position();
    int duplicates = 0;
    BatchOutcome.Stopped stopped = null;
    String scope = settings.scopeFor(group);
    boolean saved = false;
    try (Statement savepoints = c.createStatement()) {
      for (ConsumerRecord<K, V> r : records) {
        if (r.offset() < position) {
          duplicates++; // committed before: a resend
          continue;
        }
        savepoints.execute(saved ? NEXT_SAVEPOINT : SAVEPOINT);
        saved = true;
        Step step = apply(r, scope);
        if (step.kind() == Kind.FAILED) {
          savepoints.execute(ROLLBACK_TO_SAVEPOINT);
          stopped =
              new BatchOutcome.Stopped(
                  position, r.offset(), Objects.requireNonNull(step.cause()), step.attempt());
          break;
        }
        if (step.kind() == Kind.DUPLICATE) {
          duplicates++;
        }
        position = r.offset() + 1;
      }
    }
    if (position != row.position()) {
      settings.calls().advance(c, group, tp, epoch, position);
    }
    return stopped != null ? stopped : new BatchOutcome.Committed(position, duplicates);
  }

  /** Moves the position past {@code record} with no effect (its key, if any, is left alone). */
  BatchOutcome skip(ConsumerRecord<K, V> record) throws SQLException {
    OffsetCalls.Row row = settings.calls().lock(c, group, tp);
    if (row == null || row.epoch() != epoch) {
      return fenced(row);
    }
    long position = row.position();
    if (record.offset() >= position) {
      position = record.offset() + 1;
      settings.calls().advance(c, group, tp, epoch, position);
    }
    return new BatchOutcome.Committed(position, 0);
  }

  /** Ends the read-only transaction; a partition never claimed counts as claimed by another. */
  private BatchOutcome fenced(OffsetCalls.@Nullable Row row) throws SQLException {
    c.rollback();
    return row == null
        ? new BatchOutcome.Fenced(-1, 0)
        : new BatchOutcome.Fenced(row.position(), row.epoch());
  }

  /** Runs the handler on {@code r}, through its key if it has one. */
  private Step apply(ConsumerRecord<K, V> r, String scope) throws SQLException {
    String key;
    try {
      key = settings.recordKeys().keyOf(r);
    } catch (RuntimeException e) {
      return Step.failed(e, true);
    }
    if (key == null) {
      try {
        settings.handler().handle(r, c, epoch);
      } catch (Exception e) {
        return Step.failed(e, true);
      }
      String broken = brokenBy(c);
      return broken == null ? Step.APPLIED : Step.failed(new IllegalStateException(broken), true);
    }
    return applyKeyed(r, scope, key);
  }

  /**
   * Runs the handler on {@code r} inside its key's decision and completion, in this transaction: a
   * key completed before makes it a duplicate; one held by another owner past the lock timeout
   * stops the batch without counting an attempt.
   */
  private Step applyKeyed(ConsumerRecord<K, V> r, String scope, String key) {
    PostgresKeyStore keys = Objects.requireNonNull(settings.keyStore(), "keyStore");
    Exception[] handlerFailure = {null};
    boolean[] ran = {false};
    try {
      keys.inOpenTransaction(
          c,
          new IdempotencyKey(scope, key),
          Fingerprint.none(),
          (conn, token) -> {
            ran[0] = true;
            try {
              settings.handler().handle(r, conn, token);
            } catch (Exception e) {
              handlerFailure[0] = e;
              throw e;
            }
            return NO_RESPONSE;
          });
    } catch (Exception e) {
      if (e == handlerFailure[0]) {
        return Step.failed(e, true);
      }
      if (e instanceof KeyStoreException || e instanceof KeyFencedException) {
        throw (RuntimeException) e;
      }
      // In progress elsewhere: not this record's fault. Anything else (a key PostgreSQL cannot
      // store, a handler that broke the transaction) is the record's failed attempt.
      return Step.failed(e, !(e instanceof KeyInProgressException));
    }
    return ran[0] ? Step.APPLIED : Step.DUPLICATE;
  }

  /**
   * What the handler did to the transaction, if it cannot go on: ended it, or swallowed the error
   * of a statement that aborted it. Null if it can.
   */
  static @Nullable String brokenBy(Connection c) throws SQLException {
    TransactionState state =
        c.isWrapperFor(BaseConnection.class)
            ? c.unwrap(BaseConnection.class).getTransactionState()
            : TransactionState.OPEN;
    if (c.getAutoCommit() || state == TransactionState.IDLE) {
      return "the handler ended the batch's transaction (commit, rollback or auto-commit)";
    }
    if (state == TransactionState.FAILED) {
      return "a statement of the handler failed and aborted the transaction, and the handler went"
          + " on";
    }
    return null;
  }
}
