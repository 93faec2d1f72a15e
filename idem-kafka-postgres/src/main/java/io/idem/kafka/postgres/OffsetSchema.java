package io.idem.kafka.postgres;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;

/**
 * The receiver's schema as versioned plain DDL files (resources next to this class), applied in
 * order by {@link #migrate} and recorded in {@code idem_kafka_schema}, as idem-keys-postgres does
 * for its own.
 */
final class OffsetSchema {

  /** One DDL file. */
  record Migration(int version, String file, String description) {}

  /** Every migration, in order; the last one's version is the schema this library needs. */
  static final List<Migration> MIGRATIONS =
      List.of(new Migration(1, "V1__offsets.sql", "partition epochs and positions"));

  /** The schema version this library needs. */
  static final int LATEST = MIGRATIONS.get(MIGRATIONS.size() - 1).version();

  /** Advisory lock class for migrations ("IDKO"), apart from the key store's ("IDKS"). */
  private static final int MIGRATION_LOCK = 0x49444b4f;

  private OffsetSchema() {}

  /**
   * Brings the schema to {@link #LATEST} in one transaction on {@code c}, which it commits; several
   * processes may call it at once (an advisory lock serialises them, and each applies only what is
   * missing).
   *
   * @return the version before
   * @throws IllegalStateException the database's schema is newer than this library
   */
  static int migrate(Connection c) throws SQLException {
    boolean autoCommit = c.getAutoCommit();
    c.setAutoCommit(false);
    try {
      int before = apply(c);
      c.commit();
      return before;
    } catch (SQLException | RuntimeException e) {
      try {
        c.rollback();
      } catch (SQLException r) {
        e.addSuppressed(r);
      }
      throw e;
    } finally {
      c.setAutoCommit(autoCommit);
    }
  }

  private static int apply(Connection c) throws SQLException {
    try (Statement s = c.createStatement()) {
      s.execute("SELECT pg_advisory_xact_lock(" + MIGRATION_LOCK + ", 0)");
      s.execute(
          "CREATE TABLE IF NOT EXISTS idem_kafka_schema ("
              + " version integer PRIMARY KEY,"
              + " description text NOT NULL,"
              + " applied_at timestamptz NOT NULL DEFAULT now())");
      int current;
      try (ResultSet r =
          s.executeQuery("SELECT coalesce(max(version), 0) FROM idem_kafka_schema")) {
        r.next();
        current = r.getInt(1);
      }
      if (current > LATEST) {
        throw new IllegalStateException(
            "the database's Kafka receiver schema is version "
                + current
                + ", newer than this library's "
                + LATEST
                + ": use a newer idem-kafka-postgres");
      }
      for (Migration m : MIGRATIONS) {
        if (m.version() > current) {
          s.execute(script(m.file()));
          try (PreparedStatement p =
              c.prepareStatement(
                  "INSERT INTO idem_kafka_schema (version, description) VALUES (?, ?)")) {
            p.setInt(1, m.version());
            p.setString(2, m.description());
            p.executeUpdate();
          }
        }
      }
      return current;
    }
  }

  /** The text of a migration file. */
  static String script(String file) {
    try (InputStream in = OffsetSchema.class.getResourceAsStream(file)) {
      if (in == null) {
        throw new IllegalStateException("migration " + file + " is missing from the jar");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read migration " + file, e);
    }
  }
}
