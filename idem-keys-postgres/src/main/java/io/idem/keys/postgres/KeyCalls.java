package io.idem.keys.postgres;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.jspecify.annotations.Nullable;

/**
 * The store's calls on one connection: each is one prepared statement that calls one function of
 * the schema (V1__key_records.sql), so one round trip and one atomic step. The caller owns the
 * connection and its transaction; these neither commit nor roll back.
 */
final class KeyCalls {
  private static final String ACQUIRE =
      "SELECT outcome, token, deadline_ms, response FROM idem_key_acquire(?, ?, ?, ?, ?, ?)";
  private static final String BEGIN =
      "SELECT outcome, token, deadline_ms, response FROM idem_key_begin(?, ?, ?, ?)";
  // The completion and the COMMIT in one round trip (the driver sends both before it waits). If
  // the function raises, the server skips the COMMIT and the transaction stays aborted.
  private static final String FINISH_AND_COMMIT =
      "SELECT idem_key_finish(?, ?, ?, ?, ?, ?); COMMIT";
  private static final String FINISH = "SELECT idem_key_finish(?, ?, ?, ?, ?, ?)";

  /** SQLSTATE raised by idem_key_finish when the key changed hands. */
  static final String CHANGED_HANDS = "IDK01";

  /** SQLSTATE lock_not_available: a lock wait ran past lock_timeout. */
  static final String LOCK_NOT_AVAILABLE = "55P03";

  /** SQLSTATE query_canceled: the statement ran past its timeout. */
  static final String QUERY_CANCELED = "57014";

  private static final String COMPLETE = "SELECT done, current FROM idem_key_complete(?, ?, ?, ?)";
  private static final String RELEASE = "SELECT done, current FROM idem_key_release(?, ?, ?)";
  private static final String RENEW =
      "SELECT done, current, deadline_ms FROM idem_key_renew(?, ?, ?, ?)";
  private static final String PURGE = "SELECT idem_keys_purge(?)";
  private static final String COMPLETED =
      "SELECT response FROM idem_keys WHERE scope = ? AND key = ? AND state = 'completed'"
          + " AND expires_at >= statement_timestamp()";

  private final int queryTimeoutSeconds;

  /**
   * @param queryTimeoutSeconds the JDBC query timeout of every call (the driver cancels the
   *     statement on the server when it runs out); 0 for none
   */
  KeyCalls(int queryTimeoutSeconds) {
    this.queryTimeoutSeconds = queryTimeoutSeconds;
  }

  Acquisition acquire(
      Connection c,
      IdempotencyKey key,
      byte[] fingerprint,
      long timeoutMs,
      long retentionMs,
      long lockTimeoutMs)
      throws SQLException {
    try (PreparedStatement s = prepare(c, ACQUIRE)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      s.setBytes(3, fingerprint);
      s.setLong(4, timeoutMs);
      s.setLong(5, retentionMs);
      s.setLong(6, lockTimeoutMs);
      return acquisition(s);
    }
  }

  /**
   * The transactional mode's first step: decides, writes nothing, and holds the key until the
   * transaction ends. {@link Acquisition.Acquired} carries no deadline (0): the record is written
   * completed by {@link #finishAndCommit}, in the same transaction.
   */
  Acquisition begin(Connection c, IdempotencyKey key, byte[] fingerprint, long lockTimeoutMs)
      throws SQLException {
    try (PreparedStatement s = prepare(c, BEGIN)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      s.setBytes(3, fingerprint);
      s.setLong(4, lockTimeoutMs);
      return acquisition(s);
    }
  }

  /**
   * The transactional mode's last step: writes the completed record and commits, in one round trip.
   * Afterwards the server's transaction has ended (the caller still calls {@code commit()}, which
   * then sends nothing, so that a pool's bookkeeping stays right).
   *
   * @throws SQLException with SQLSTATE {@link #CHANGED_HANDS} if the record holds a greater token
   *     (nothing committed); any other: the commit's outcome is unknown
   */
  void finishAndCommit(
      Connection c,
      IdempotencyKey key,
      byte[] fingerprint,
      long token,
      byte[] response,
      long retentionMs)
      throws SQLException {
    finish(c, FINISH_AND_COMMIT, key, fingerprint, token, response, retentionMs);
  }

  /**
   * The last step inside a transaction the caller ends: writes the completed record, which commits
   * or rolls back with the caller's transaction.
   *
   * @throws SQLException with SQLSTATE {@link #CHANGED_HANDS} if the record holds a greater token
   *     (the transaction is then aborted)
   */
  void finish(
      Connection c,
      IdempotencyKey key,
      byte[] fingerprint,
      long token,
      byte[] response,
      long retentionMs)
      throws SQLException {
    finish(c, FINISH, key, fingerprint, token, response, retentionMs);
  }

  private void finish(
      Connection c,
      String sql,
      IdempotencyKey key,
      byte[] fingerprint,
      long token,
      byte[] response,
      long retentionMs)
      throws SQLException {
    try (PreparedStatement s = prepare(c, sql)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      s.setBytes(3, fingerprint);
      s.setLong(4, token);
      s.setBytes(5, response);
      s.setLong(6, retentionMs);
      s.execute();
    }
  }

  private static Acquisition acquisition(PreparedStatement s) throws SQLException {
    try (ResultSet r = one(s)) {
      String outcome = r.getString(1);
      switch (outcome) {
        case "A":
          return new Acquisition.Acquired(r.getLong(2), r.getLong(3));
        case "C":
          return new Acquisition.Completed(r.getBytes(4));
        case "I":
          return new Acquisition.InProgress(r.getLong(3));
        case "M":
          return new Acquisition.Mismatch();
        default:
          throw new SQLException("a key function answered an unknown outcome: " + outcome);
      }
    }
  }

  Settlement complete(Connection c, IdempotencyKey key, long token, byte[] response)
      throws SQLException {
    long current;
    try (PreparedStatement s = prepare(c, COMPLETE)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      s.setLong(3, token);
      s.setBytes(4, response);
      try (ResultSet r = one(s)) {
        if (r.getBoolean(1)) {
          return new Settlement.Done(0);
        }
        current = r.getLong(2);
      }
    }
    return notOwned(c, key, current);
  }

  Settlement release(Connection c, IdempotencyKey key, long token) throws SQLException {
    long current;
    try (PreparedStatement s = prepare(c, RELEASE)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      s.setLong(3, token);
      try (ResultSet r = one(s)) {
        if (r.getBoolean(1)) {
          return new Settlement.Done(0);
        }
        current = r.getLong(2);
      }
    }
    return notOwned(c, key, current);
  }

  Settlement renew(Connection c, IdempotencyKey key, long token, long extensionMs)
      throws SQLException {
    long current;
    try (PreparedStatement s = prepare(c, RENEW)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      s.setLong(3, token);
      s.setLong(4, extensionMs);
      try (ResultSet r = one(s)) {
        if (r.getBoolean(1)) {
          return new Settlement.Done(r.getLong(3));
        }
        current = r.getLong(2);
      }
    }
    return notOwned(c, key, current);
  }

  /**
   * The answer to a token that no longer owns the key: the key functions answer the current owner's
   * token, 0 if none; for 0, a read tells a completed key (its outcome) from one that is gone. A
   * completed record stays so until its retention ends, so the read sees what refused.
   */
  private Settlement notOwned(Connection c, IdempotencyKey key, long current) throws SQLException {
    if (current != 0) {
      return new Settlement.Fenced(current);
    }
    try (PreparedStatement s = prepare(c, COMPLETED)) {
      s.setString(1, key.scope());
      s.setString(2, key.key());
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? new Settlement.Completed(r.getBytes(1)) : new Settlement.Fenced(0);
      }
    }
  }

  int purge(Connection c, int limit) throws SQLException {
    try (PreparedStatement s = prepare(c, PURGE)) {
      s.setInt(1, limit);
      try (ResultSet r = one(s)) {
        return r.getInt(1);
      }
    }
  }

  private PreparedStatement prepare(Connection c, String sql) throws SQLException {
    PreparedStatement s = c.prepareStatement(sql);
    if (queryTimeoutSeconds > 0) {
      s.setQueryTimeout(queryTimeoutSeconds);
    }
    return s;
  }

  /** Executes {@code s}, positioned on its only row. */
  private static ResultSet one(PreparedStatement s) throws SQLException {
    ResultSet r = s.executeQuery();
    if (!r.next()) {
      r.close();
      throw new SQLException("a key function answered no row");
    }
    return r;
  }

  /** A failure of a call as the store contract's {@link KeyStoreException}: outcome unknown. */
  static KeyStoreException failure(@Nullable IdempotencyKey key, String what, SQLException e) {
    String state = e.getSQLState();
    String how =
        QUERY_CANCELED.equals(state)
            ? "did not finish " + what + " within the statement timeout"
            : "failed during " + what;
    return new KeyStoreException(
        key,
        "PostgreSQL "
            + how
            + " (SQLSTATE "
            + state
            + ": "
            + e.getMessage()
            + "); the outcome is unknown, and retrying with the same key is safe",
        e);
  }
}
