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
import java.util.List;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;

/**
 * One batch of a partition's records (or one skipped record) in one transaction on a connection
 * whose auto-commit is off: lock the partition's row, check the epoch, apply each record, advance
 * the position; if a record fails, roll back and apply the records before it in a new transaction.
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
   * Applies {@code records} (offsets ascending) in order, those below the position skipped, and
   * moves the position past the last one applied. Optimistically: the records run without
   * savepoints, which would cost a round trip each. If one fails, the transaction is rolled back
   * and the records before it run again in a new one, which commits without it: nothing of the
   * failed record lands, and the handler may run more than once for the records before it (their
   * writes land once).
   *
   * @throws SQLException the store's own statements failed: nothing may be committed
   * @throws KeyStoreException a key's statements failed, or the connection broke
   */
  BatchOutcome process(List<ConsumerRecord<K, V>> records) throws SQLException {
    Attempt a = attempt(records, records.size());
    if (a.fenced != null) {
      return a.fenced;
    }
    Attempt failed = a;
    while (a.failedIndex >= 0) {
      c.rollback();
      a = attempt(records, a.failedIndex);
      if (a.fenced != null) {
        return a.fenced;
      }
      if (a.failedIndex >= 0) {
        failed = a; // an earlier record failed this time: the batch stops there
      }
    }
    if (a.position != a.stored) {
      settings.calls().advance(c, group, tp, epoch, a.position);
    }
    if (failed.failedIndex < 0) {
      return new BatchOutcome.Committed(a.position, a.duplicates);
    }
    Step step = Objects.requireNonNull(failed.failedStep);
    return new BatchOutcome.Stopped(
        a.position,
        records.get(failed.failedIndex).offset(),
        Objects.requireNonNull(step.cause()),
        step.attempt());
  }

  /** One pass over a batch's first records in the current transaction. */
  private static final class Attempt {
    BatchOutcome.@Nullable Fenced fenced;
    long stored; // the position the row held
    long position;
    int duplicates;
    int failedIndex = -1;
    @Nullable Step failedStep;
  }

  /**
   * Locks the row, checks the epoch, and applies the first {@code limit} records up to the first
   * that fails (whose index and step it records). The transaction stays open.
   */
  private Attempt attempt(List<ConsumerRecord<K, V>> records, int limit) throws SQLException {
    Attempt a = new Attempt();
    OffsetCalls.Row row = settings.calls().lock(c, group, tp);
    if (row == null || row.epoch() != epoch) {
      a.fenced = fenced(row);
      return a;
    }
    a.stored = row.position();
    a.position = row.position();
    String scope = settings.scopeFor(group);
    for (int i = 0; i < limit; i++) {
      ConsumerRecord<K, V> r = records.get(i);
      if (r.offset() < a.position) {
        a.duplicates++; // committed before: a resend
        continue;
      }
      Step step = apply(r, scope);
      if (step.kind() == Kind.FAILED) {
        a.failedIndex = i;
        a.failedStep = step;
        return a;
      }
      if (step.kind() == Kind.DUPLICATE) {
        a.duplicates++;
      }
      a.position = r.offset() + 1;
    }
    return a;
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
  private BatchOutcome.Fenced fenced(OffsetCalls.@Nullable Row row) throws SQLException {
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
      if (broken == null) {
        return Step.APPLIED;
      }
      if (broken.equals(ENDED)) {
        // What the handler wrote may have committed on its own: not a record's failure to retry
        // but a broken guarantee to report. The stage fails; the batch's own writes roll back.
        throw new SQLException(broken);
      }
      return Step.failed(new IllegalStateException(broken), true);
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

  private static final String ENDED =
      "the handler ended the batch's transaction (commit, rollback or auto-commit)";

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
      return ENDED;
    }
    if (state == TransactionState.FAILED) {
      return "a statement of the handler failed and aborted the transaction, and the handler went"
          + " on";
    }
    return null;
  }
}
