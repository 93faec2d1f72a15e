package io.idem.kafka.postgres;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;

/**
 * The statements on {@code idem_kafka_offsets} (V1__offsets.sql), each one round trip. The caller
 * owns the connection and its transaction; these neither commit nor roll back.
 */
final class OffsetCalls {

  /**
   * Raises synchronous_commit to on for the transaction if it is off: an epoch or a position that a
   * crash of the server could take back would let two claimants share an epoch, or apply a record
   * twice. Any other setting (on, local, remote_*) flushes locally already and is kept.
   */
  private static final String DURABLE =
      "set_config('synchronous_commit', CASE current_setting('synchronous_commit')"
          + " WHEN 'off' THEN 'on' ELSE current_setting('synchronous_commit') END, true)";

  // The sub-select is referenced so that the planner cannot leave DURABLE out; WHERE keeps ON
  // CONFLICT from parsing as a join's ON.
  private static final String CLAIM =
      "INSERT INTO idem_kafka_offsets AS o (consumer_group, topic, partition, epoch, position)"
          + " SELECT ?, ?, ?, 1, -1 FROM (SELECT "
          + DURABLE
          + " AS v) AS durable WHERE durable.v IS NOT NULL"
          + " ON CONFLICT (consumer_group, topic, partition) DO UPDATE SET epoch = o.epoch + 1"
          + " RETURNING o.epoch, o.position";

  // Locks the partition's row until the transaction ends (a claim waits for it), and sets the
  // transaction's timeouts for the statements that follow (the handler's included).
  private static final String LOCK =
      "SELECT o.epoch, o.position, set_config('statement_timeout', ?, true),"
          + " set_config('lock_timeout', ?, true), "
          + DURABLE
          + " FROM idem_kafka_offsets o"
          + " WHERE o.consumer_group = ? AND o.topic = ? AND o.partition = ? FOR UPDATE";

  private static final String ADVANCE =
      "UPDATE idem_kafka_offsets SET position = ?"
          + " WHERE consumer_group = ? AND topic = ? AND partition = ? AND epoch = ?";

  /** A partition's row: its epoch and position. */
  record Row(long epoch, long position) {}

  private final int queryTimeoutSeconds;
  private final String statementTimeoutMs;
  private final String lockTimeoutMs;

  /**
   * @param statementTimeoutMs bounds each statement of a batch's transaction, the handler's too
   * @param lockTimeoutMs bounds each lock wait of a batch's transaction after its row's
   */
  OffsetCalls(long statementTimeoutMs, long lockTimeoutMs) {
    // The JDBC timeout has whole seconds: round up, so that the server's own timeouts come first.
    this.queryTimeoutSeconds = (int) Math.max(1, (statementTimeoutMs + 999) / 1000);
    this.statementTimeoutMs = Long.toString(statementTimeoutMs);
    this.lockTimeoutMs = Long.toString(lockTimeoutMs);
  }

  /** Raises the partition's epoch (1 for a new row, position -1); commits with the statement. */
  Row claim(Connection c, String group, TopicPartition tp) throws SQLException {
    try (PreparedStatement s = prepare(c, CLAIM)) {
      s.setString(1, group);
      s.setString(2, tp.topic());
      s.setInt(3, tp.partition());
      try (ResultSet r = s.executeQuery()) {
        if (!r.next()) {
          throw new SQLException("the claim returned no row");
        }
        return new Row(r.getLong(1), r.getLong(2));
      }
    }
  }

  /** Locks the partition's row until the transaction ends; null if it was never claimed. */
  @Nullable Row lock(Connection c, String group, TopicPartition tp) throws SQLException {
    try (PreparedStatement s = prepare(c, LOCK)) {
      s.setString(1, statementTimeoutMs);
      s.setString(2, lockTimeoutMs);
      s.setString(3, group);
      s.setString(4, tp.topic());
      s.setInt(5, tp.partition());
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? new Row(r.getLong(1), r.getLong(2)) : null;
      }
    }
  }

  /** Sets the position of the row locked under {@code epoch}. */
  void advance(Connection c, String group, TopicPartition tp, long epoch, long position)
      throws SQLException {
    try (PreparedStatement s = prepare(c, ADVANCE)) {
      s.setLong(1, position);
      s.setString(2, group);
      s.setString(3, tp.topic());
      s.setInt(4, tp.partition());
      s.setLong(5, epoch);
      int n = s.executeUpdate();
      if (n != 1) {
        throw new SQLException("the position update matched " + n + " rows, not 1");
      }
    }
  }

  private PreparedStatement prepare(Connection c, String sql) throws SQLException {
    PreparedStatement s = c.prepareStatement(sql);
    s.setQueryTimeout(queryTimeoutSeconds);
    return s;
  }
}
