package io.idem.keys.postgres;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyFencedException;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyMismatchException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.StoredOutcomes;
import io.idem.keys.spi.Acquisition;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.postgresql.core.BaseConnection;
import org.postgresql.core.TransactionState;

/**
 * One run of the transactional mode ({@link PostgresKeyStore#inTransaction}): begin the key, run
 * the work, finish the key and commit, on the caller's connection; or roll everything back. Tracks
 * whether its transaction has ended, so that no path leaves it open for the restored auto-commit
 * mode to commit.
 */
final class KeyTransaction {

  /** What every run shares: the store's settings for the mode. */
  record Settings(
      KeyCalls calls,
      long lockTimeoutMs,
      long retentionMs,
      int maxResponseBytes,
      List<Class<? extends Throwable>> storedFailures) {}

  private static final System.Logger LOG = System.getLogger(KeyTransaction.class.getName());

  private final Settings settings;
  private final Connection c;
  private final IdempotencyKey key;
  private final byte[] fp;
  private boolean ended; // committed or rolled back: the finally below must not roll back

  private KeyTransaction(Settings settings, Connection c, IdempotencyKey key, byte[] fp) {
    this.settings = settings;
    this.c = c;
    this.key = key;
    this.fp = fp;
  }

  /**
   * Runs {@code work} for {@code key} in one transaction on {@code c}, as {@link
   * PostgresKeyStore#inTransaction} says; the arguments are checked.
   */
  static byte[] run(
      Settings settings, Connection c, IdempotencyKey key, byte[] fp, TransactionalWork work)
      throws Exception {
    boolean autoCommit = begin(c, key);
    KeyTransaction tx = new KeyTransaction(settings, c, key, fp);
    try {
      return tx.run(work);
    } finally {
      if (!tx.ended) {
        tx.rollback(null); // an Error from the work; never let the restore below commit
      }
      try {
        c.setAutoCommit(autoCommit);
      } catch (SQLException e) {
        // The connection broke; the transaction has ended either way. The pool discards it.
        LOG.log(System.Logger.Level.DEBUG, "cannot restore auto-commit", e);
      }
    }
  }

  /**
   * Runs {@code work} for {@code key} inside the transaction open on {@code c}, as {@link
   * PostgresKeyStore#inOpenTransaction} says: neither begins nor ends it, and on a failure leaves
   * it to the caller to roll back. The arguments are checked.
   */
  static byte[] joined(
      Settings settings, Connection c, IdempotencyKey key, byte[] fp, TransactionalWork work)
      throws Exception {
    try {
      if (c.getAutoCommit()) {
        throw new IllegalStateException(
            "the connection is in auto-commit mode: inOpenTransaction joins a transaction the"
                + " caller has open (setAutoCommit(false) first)");
      }
    } catch (SQLException e) {
      throw KeyCalls.failure(key, "begin", e);
    }
    KeyTransaction tx = new KeyTransaction(settings, c, key, fp);
    Acquisition a = tx.begin();
    if (a instanceof Acquisition.Acquired owned) {
      byte[] value = tx.runWork(owned.token(), work);
      byte[] stored = tx.checkedSize(StoredOutcomes.success(value));
      try {
        settings.calls().finish(c, key, fp, owned.token(), stored, settings.retentionMs());
      } catch (SQLException e) {
        throw tx.finishFailure(owned.token(), e, "completing the key failed");
      }
      return value;
    }
    return tx.notRun(a);
  }

  private byte[] run(TransactionalWork work) throws Exception {
    Acquisition a;
    try {
      a = begin();
    } catch (RuntimeException e) {
      rollback(e);
      throw e;
    }
    if (a instanceof Acquisition.Acquired owned) {
      return runOwned(owned.token(), work);
    }
    rollback(null); // only read; ends the lock wait of duplicates behind this one at once
    return notRun(a);
  }

  /** Decides on the key, holding it until the transaction ends; a failure is thrown as is. */
  private Acquisition begin() {
    try {
      return settings.calls().begin(c, key, fp, settings.lockTimeoutMs());
    } catch (SQLException e) {
      throw KeyCalls.LOCK_NOT_AVAILABLE.equals(e.getSQLState())
          ? new KeyInProgressException(
              key,
              "another transaction held the key longer than the lock timeout ("
                  + settings.lockTimeoutMs()
                  + " ms); nothing ran",
              e)
          : KeyCalls.failure(key, "acquire", e);
    }
  }

  /** The answer to a key this run does not own: its stored response, or why not. */
  private byte[] notRun(Acquisition a) {
    if (a instanceof Acquisition.Completed done) {
      return StoredOutcomes.replay(key, done.response());
    }
    if (a instanceof Acquisition.Mismatch) {
      throw new KeyMismatchException(key, "the key was used with another payload", null);
    }
    throw new KeyInProgressException(
        key,
        "an owner outside a transaction holds the key until "
            + ((Acquisition.InProgress) a).deadlineMs()
            + " (database time); nothing ran",
        null);
  }

  /**
   * Runs the work inside the joined transaction: its response, checked; a failure is thrown as is,
   * or as {@link KeyStoreException} if the connection broke. Nothing is rolled back here.
   */
  private byte[] runWork(long token, TransactionalWork work) throws Exception {
    byte[] value;
    try {
      value = work.run(c, token);
    } catch (Exception e) {
      KeyStoreException lost = connectionLost(e);
      throw lost != null ? lost : e;
    }
    if (value == null) {
      throw new IllegalStateException(
          "the work returned null; return an empty array for an empty response");
    }
    String broken = brokenBy();
    if (broken != null) {
      throw new IllegalStateException(broken);
    }
    return value;
  }

  /** {@code stored}, if it fits in maxResponseBytes. */
  private byte[] checkedSize(byte[] stored) {
    if (stored.length > settings.maxResponseBytes()) {
      throw new IllegalArgumentException(
          "the response is "
              + stored.length
              + " bytes stored, over maxResponseBytes "
              + settings.maxResponseBytes()
              + "; nothing was written");
    }
    return stored;
  }

  /** The failure of writing the key's completion: fenced, or the store's. */
  private RuntimeException finishFailure(long token, SQLException e, String what) {
    return KeyCalls.CHANGED_HANDS.equals(e.getSQLState())
        ? new KeyFencedException(
            key,
            "the key changed hands during the transaction (its locks were let go early):"
                + " token "
                + token
                + " no longer owns it; nothing of this transaction was written",
            e)
        : new KeyStoreException(
            key,
            what
                + " (SQLSTATE "
                + e.getSQLState()
                + ": "
                + e.getMessage()
                + "): the outcome is unknown (whether the work and its outcome were"
                + " recorded); a retry with the same key replays them if they were, or runs"
                + " the work if not",
            e);
  }

  private byte[] runOwned(long token, TransactionalWork work) throws Exception {
    Savepoint beforeWork = settings.storedFailures().isEmpty() ? null : savepoint();
    byte[] value;
    try {
      value = work.run(c, token);
    } catch (Exception e) {
      KeyStoreException lost = connectionLost(e);
      if (lost != null) {
        rollback(lost);
        throw lost;
      }
      if (beforeWork != null && stored(e)) {
        storeFailure(token, beforeWork, e);
      } else {
        rollback(e);
      }
      throw e;
    }
    if (value == null) {
      IllegalStateException e =
          new IllegalStateException(
              "the work returned null; return an empty array for an empty response");
      rollback(e);
      throw e;
    }
    String broken = brokenBy();
    if (broken != null) {
      IllegalStateException e = new IllegalStateException(broken);
      rollback(e);
      throw e;
    }
    settle(token, StoredOutcomes.success(value));
    return value;
  }

  /**
   * What the work did to the transaction that began the key, if it cannot go on: ended it, or
   * swallowed the error of a statement that aborted it. Null if it can.
   */
  private @Nullable String brokenBy() {
    try {
      TransactionState state =
          c.isWrapperFor(BaseConnection.class)
              ? c.unwrap(BaseConnection.class).getTransactionState()
              : TransactionState.OPEN;
      if (c.getAutoCommit() || state == TransactionState.IDLE) {
        return "the work ended the transaction (commit, rollback or auto-commit): its writes"
            + " are not tied to the key, and the key's outcome was not recorded";
      }
      if (state == TransactionState.FAILED) {
        return "a statement of the work failed and aborted the transaction, and the work went"
            + " on: nothing was written";
      }
      return null;
    } catch (SQLException e) {
      return "the connection failed after the work: " + e.getMessage();
    }
  }

  /** Rolls the work back to its savepoint, and stores and commits its failure as the outcome. */
  private void storeFailure(long token, Savepoint beforeWork, Exception e) {
    try {
      c.rollback(beforeWork);
    } catch (SQLException r) {
      KeyStoreException out = KeyCalls.failure(key, "rollback to the savepoint", r);
      out.addSuppressed(e);
      rollback(out);
      throw out;
    }
    settle(token, StoredOutcomes.failure(e));
  }

  /** Completes the key with {@code stored} and commits. */
  private void settle(long token, byte[] stored) {
    try {
      checkedSize(stored);
    } catch (IllegalArgumentException e) {
      rollback(e);
      throw e;
    }
    try {
      settings.calls().finishAndCommit(c, key, fp, token, stored, settings.retentionMs());
    } catch (SQLException e) {
      RuntimeException out = finishFailure(token, e, "completing and committing failed");
      rollback(out);
      throw out;
    }
    ended = true;
    try {
      c.commit(); // the server's transaction has ended; this keeps a pool's bookkeeping right
    } catch (SQLException e) {
      LOG.log(System.Logger.Level.DEBUG, "commit after the committed finish", e);
    }
  }

  private Savepoint savepoint() {
    try {
      return c.setSavepoint();
    } catch (SQLException e) {
      KeyStoreException out = KeyCalls.failure(key, "savepoint", e);
      rollback(out);
      throw out;
    }
  }

  /**
   * The store's failure for a work that failed because the connection broke (an SQLException in its
   * causes with SQLSTATE class 08, connection exception, or 57P, operator intervention such as a
   * terminated backend; or the connection is closed), or null if it failed for its own reasons. The
   * transaction did not commit: neither the key nor the work's writes were stored.
   */
  private @Nullable KeyStoreException connectionLost(Exception e) {
    SQLException sql = null;
    for (Throwable t = e; t != null && sql == null; t = t.getCause()) {
      if (t instanceof SQLException x) {
        sql = x;
      }
    }
    if (sql == null) {
      return null;
    }
    String state = sql.getSQLState();
    boolean lost = state != null && (state.startsWith("08") || state.startsWith("57P"));
    if (!lost) {
      try {
        lost = c.isClosed();
      } catch (SQLException closed) {
        lost = true;
      }
    }
    if (!lost) {
      return null;
    }
    KeyStoreException out =
        new KeyStoreException(
            key,
            "the connection to PostgreSQL broke during the work (SQLSTATE "
                + state
                + ": "
                + sql.getMessage()
                + "); the transaction did not commit, and retrying with the same key is safe",
            sql);
    if (sql != e) {
      out.addSuppressed(e);
    }
    return out;
  }

  /**
   * Rolls the transaction back. A failure is added to {@code inFlight}, or thrown as {@link
   * KeyStoreException} if nothing is in flight: the connection is then unusable.
   */
  void rollback(@Nullable Throwable inFlight) {
    ended = true;
    try {
      c.rollback();
    } catch (SQLException e) {
      if (inFlight != null) {
        inFlight.addSuppressed(e);
      } else {
        throw KeyCalls.failure(key, "rollback", e);
      }
    }
  }

  /**
   * Starts the transaction (auto-commit off) on an idle connection; returns the mode to restore.
   */
  private static boolean begin(Connection c, IdempotencyKey key) {
    try {
      boolean autoCommit = c.getAutoCommit();
      if (!autoCommit && c.isWrapperFor(BaseConnection.class)) {
        TransactionState state = c.unwrap(BaseConnection.class).getTransactionState();
        if (state != TransactionState.IDLE) {
          throw new IllegalStateException(
              "the connection is inside a transaction ("
                  + state
                  + "); inTransaction begins and ends its own: commit or roll back first");
        }
      }
      c.setAutoCommit(false);
      return autoCommit;
    } catch (SQLException e) {
      throw KeyCalls.failure(key, "begin", e);
    }
  }

  private boolean stored(Exception e) {
    for (Class<? extends Throwable> t : settings.storedFailures()) {
      if (t.isInstance(e)) {
        return true;
      }
    }
    return false;
  }
}
