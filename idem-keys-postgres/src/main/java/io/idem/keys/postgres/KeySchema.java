package io.idem.keys.postgres;

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
 * The store's schema as versioned plain DDL files (resources next to this class), applied in order
 * by {@link #migrate} and recorded in {@code idem_keys_schema}. Plain files rather than a migration
 * tool: the store is a library inside its users' services, and a tool's own history table would
 * collide with the one the service's own migrations keep; a team with Flyway or Liquibase can apply
 * the same files with it instead.
 */
final class KeySchema {

  /** One DDL file. */
  record Migration(int version, String file, String description) {}

  /** Every migration, in order; the last one's version is the schema this library needs. */
  static final List<Migration> MIGRATIONS =
      List.of(
          new Migration(
              1,
              "V1__key_records.sql",
              "key records, the token sequence, one function per transition"));

  /** The schema version this library needs. */
  static final int LATEST = MIGRATIONS.get(MIGRATIONS.size() - 1).version();

  /** Advisory lock class for migrations ("IDKS"), apart from the keys' class ("IDKY"). */
  private static final int MIGRATION_LOCK = 0x49444b53;

  private KeySchema() {}

  /**
   * Brings the schema to {@link #LATEST} in one transaction on {@code c}, which it commits; several
   * processes may call it at once (an advisory lock serialises them, and each applies only what is
   * missing).
   *
   * @return the version before
   * @throws IllegalStateException the database is not UTF8, or its schema is newer than this
   *     library
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
      try (ResultSet r = s.executeQuery("SHOW server_encoding")) {
        r.next();
        String encoding = r.getString(1);
        if (!"UTF8".equalsIgnoreCase(encoding)) {
          throw new IllegalStateException(
              "the database's encoding is "
                  + encoding
                  + "; keys need UTF8 (any scope and key must be stored as given)");
        }
      }
      s.execute("SELECT pg_advisory_xact_lock(" + MIGRATION_LOCK + ", 0)");
      s.execute(
          "CREATE TABLE IF NOT EXISTS idem_keys_schema ("
              + " version integer PRIMARY KEY,"
              + " description text NOT NULL,"
              + " applied_at timestamptz NOT NULL DEFAULT now())");
      int current;
      try (ResultSet r = s.executeQuery("SELECT coalesce(max(version), 0) FROM idem_keys_schema")) {
        r.next();
        current = r.getInt(1);
      }
      if (current > LATEST) {
        throw new IllegalStateException(
            "the database's key schema is version "
                + current
                + ", newer than this library's "
                + LATEST
                + ": use a newer idem-keys-postgres");
      }
      for (Migration m : MIGRATIONS) {
        if (m.version() > current) {
          s.execute(script(m.file()));
          try (PreparedStatement p =
              c.prepareStatement(
                  "INSERT INTO idem_keys_schema (version, description) VALUES (?, ?)")) {
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
    try (InputStream in = KeySchema.class.getResourceAsStream(file)) {
      if (in == null) {
        throw new IllegalStateException("migration " + file + " is missing from the jar");
      }
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read migration " + file, e);
    }
  }
}
