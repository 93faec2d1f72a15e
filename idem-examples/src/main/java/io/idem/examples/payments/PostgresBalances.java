package io.idem.examples.payments;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotentRequest;
import io.idem.http.TransactionalKeys;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.postgres.PostgresKeyStore;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Optional;

/**
 * Balances in a PostgreSQL table ({@value #TABLE}: one row per account), keys in the PostgreSQL
 * store, which the filter runs in its transactional mode: a keyed withdrawal acquires its key,
 * reads and debits the row, and stores its response in one transaction on one connection, so the
 * debit commits with the key's outcome or not at all. The plain endpoint's debit is the {@code
 * UPDATE} alone, in auto-commit. Connections come from a HikariCP pool of its own.
 */
final class PostgresBalances implements Balances {
  /** The accounts table. */
  static final String TABLE = "payments_accounts";

  /** Default {@code --pool}: 16 connections. */
  static final int DEFAULT_POOL = 16;

  /** How long a request waits for a pooled connection, and a statement may run. */
  static final Duration TIMEOUT = Duration.ofSeconds(5);

  private static final String SELECT = "SELECT balance FROM " + TABLE + " WHERE account = ?";
  private static final String STORED =
      "SELECT response FROM idem_keys WHERE scope = ? AND key = ? AND state = 'completed'"
          + " AND expires_at > now()";
  private static final String DEBIT =
      "UPDATE " + TABLE + " SET balance = balance - ? WHERE account = ?";

  private final HikariDataSource pool;
  private final PostgresKeyStore keys;

  private PostgresBalances(HikariDataSource pool, PostgresKeyStore keys) {
    this.pool = pool;
    this.keys = keys;
  }

  /**
   * Connects a pool of {@code size} to {@code jdbcUrl}, migrates the key store's schema and creates
   * the accounts table if missing.
   *
   * @throws IllegalArgumentException if {@code jdbcUrl} is not a PostgreSQL JDBC URL
   * @throws RuntimeException if the database cannot be reached (HikariCP's, or the store's)
   */
  static PostgresBalances connect(String jdbcUrl, String user, String password, int size) {
    if (!jdbcUrl.startsWith("jdbc:postgresql:")) {
      throw new IllegalArgumentException("--jdbc-url must be jdbc:postgresql:..., got " + jdbcUrl);
    }
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setUsername(user);
    config.setPassword(password);
    config.setMaximumPoolSize(size);
    config.setMinimumIdle(size);
    config.setConnectionTimeout(TIMEOUT.toMillis());
    config.setPoolName("payments-pg");
    // The server bounds each statement, the driver a server that stops answering.
    config.addDataSourceProperty("options", "-c statement_timeout=" + TIMEOUT.toMillis());
    config.addDataSourceProperty("socketTimeout", "30");
    HikariDataSource pool = new HikariDataSource(config);
    PostgresKeyStore keys = null;
    try {
      keys = PostgresKeyStore.builder(pool).build();
      keys.migrate();
      try (Connection c = pool.getConnection();
          Statement s = c.createStatement()) {
        s.execute(
            "CREATE TABLE IF NOT EXISTS "
                + TABLE
                + " (account text PRIMARY KEY, balance bigint NOT NULL)");
      }
      return new PostgresBalances(pool, keys);
    } catch (SQLException | RuntimeException e) {
      if (keys != null) {
        keys.close();
      }
      pool.close();
      throw e instanceof RuntimeException r
          ? r
          : new IllegalStateException("cannot create " + TABLE + ": " + e.getMessage(), e);
    }
  }

  @Override
  public PaymentsService.Store store() {
    return PaymentsService.Store.POSTGRES;
  }

  @Override
  public IdempotencyFilter.Builder filter() {
    return IdempotencyFilter.builder((TransactionalKeys) this::inTransaction);
  }

  /** A keyed request's run: the store's transactional mode on a connection of the pool. */
  private byte[] inTransaction(
      IdempotencyKey key, Fingerprint fingerprint, TransactionalKeys.Step step) throws Exception {
    Connection c;
    try {
      c = pool.getConnection();
    } catch (SQLException e) {
      throw new KeyStoreException(key, "no database connection: " + e.getMessage(), e);
    }
    try (c) {
      return keys.inTransaction(c, key, fingerprint, step::run);
    }
  }

  @Override
  public void open(String account, long balance) {
    sql(
        c -> {
          try (PreparedStatement s =
              c.prepareStatement(
                  "INSERT INTO "
                      + TABLE
                      + " (account, balance) VALUES (?, ?) ON CONFLICT (account) DO NOTHING")) {
            s.setString(1, account);
            s.setLong(2, balance);
            s.executeUpdate();
          }
          return null;
        });
  }

  @Override
  public Optional<Long> balance(Optional<IdempotentRequest> keyed, String account) {
    Optional<Connection> tx = keyed.flatMap(k -> k.transaction(Connection.class));
    try {
      return tx.isPresent() ? read(tx.get(), account) : sql(c -> read(c, account));
    } catch (SQLException e) {
      throw new IllegalStateException("cannot read " + account + ": " + e.getMessage(), e);
    }
  }

  private static Optional<Long> read(Connection c, String account) throws SQLException {
    try (PreparedStatement s = c.prepareStatement(SELECT)) {
      s.setString(1, account);
      try (ResultSet r = s.executeQuery()) {
        return r.next() ? Optional.of(r.getLong(1)) : Optional.empty();
      }
    }
  }

  @Override
  public void debit(String account, long amount) {
    sql(c -> update(c, account, amount));
  }

  @Override
  public void debit(IdempotentRequest keyed, String account, long amount) {
    Connection c =
        keyed
            .transaction(Connection.class)
            .orElseThrow(() -> new IllegalStateException("a keyed request outside a transaction"));
    try {
      update(c, account, amount);
    } catch (SQLException e) {
      // The transaction rolls back: nothing of the key or the debit is written.
      throw new IllegalStateException("cannot debit " + account + ": " + e.getMessage(), e);
    }
  }

  private static Void update(Connection c, String account, long amount) throws SQLException {
    try (PreparedStatement s = c.prepareStatement(DEBIT)) {
      s.setLong(1, amount);
      s.setString(2, account);
      s.executeUpdate();
    }
    return null;
  }

  /** Runs {@code call} on a pooled connection in auto-commit; failures are unchecked. */
  private <T> T sql(SqlCall<T> call) {
    try (Connection c = pool.getConnection()) {
      return call.apply(c);
    } catch (SQLException e) {
      throw new IllegalStateException("database: " + e.getMessage(), e);
    }
  }

  @Override
  public Optional<byte[]> storedResponse(IdempotencyKey key) {
    return sql(
        c -> {
          try (PreparedStatement s = c.prepareStatement(STORED)) {
            s.setString(1, key.scope());
            s.setString(2, key.key());
            try (ResultSet r = s.executeQuery()) {
              return r.next()
                  ? Withdrawals.executorResult(r.getBytes(1))
                  : Optional.<byte[]>empty();
            }
          }
        });
  }

  @FunctionalInterface
  private interface SqlCall<T> {
    T apply(Connection c) throws SQLException;
  }

  @Override
  public void close() {
    try {
      keys.close();
    } finally {
      pool.close();
    }
  }
}
