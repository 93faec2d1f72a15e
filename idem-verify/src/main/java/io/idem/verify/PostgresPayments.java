package io.idem.verify;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.idem.keys.Fingerprint;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyMismatchException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.testkit.stores.PostgresServer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;

/**
 * The keys campaign on the PostgreSQL store in its transactional mode: a payment's ledger row is
 * inserted by the work of {@link PostgresKeyStore#inTransaction}, in the transaction that also
 * decides the key and records it completed, so the entry and the completion commit together or not
 * at all. The mode has no separate acquire: {@link #connect}'s {@code acquire} only reports a
 * completed key (a read), and otherwise lets the worker go on to {@code pay}, where the store
 * decides under the key's lock. A duplicate that finds the key locked by a paused owner waits at
 * most the lock timeout and asks again.
 *
 * <p>Server: a private PostgreSQL ({@link PostgresServer}, fsync on), whose fault is an immediate
 * shutdown (SIGQUIT: no checkpoint, crash recovery from the WAL at the next start) and a restart
 * after 0.2-1 s on the same port and directory. Workers and checker connect directly.
 *
 * <p>The checker reads the tables directly: {@code idem_keys} (token, and the response in the
 * stored-outcome form docs/KEYS.md documents: a 0 byte, then the response) and the ledger.
 */
final class PostgresPayments implements PaymentStore {
  /** The ledger: one row per payment entry, {@link Payment#entry} of the token that paid. */
  static final String LEDGER_DDL =
      "CREATE TABLE IF NOT EXISTS payments_ledger ("
          + "id bigserial PRIMARY KEY, account integer NOT NULL, entry text NOT NULL)";

  @Override
  public String name() {
    return "postgres";
  }

  @Override
  public Capabilities capabilities() {
    return Capabilities.KEY_STORE;
  }

  @Override
  public Servers start(Path dir) throws Exception {
    PostgresServer pg = PostgresServer.create(PostgresServer.Durability.DURABLE, List.of());
    try (HikariDataSource pool = pool(pg.jdbcUrl(), 1, Duration.ofSeconds(10));
        PostgresKeyStore store = PostgresKeyStore.builder(pool).build()) {
      store.migrate();
      try (Connection c = pool.getConnection();
          Statement s = c.createStatement()) {
        s.execute(LEDGER_DDL);
      }
    } catch (RuntimeException | SQLException e) {
      pg.close();
      throw e;
    }
    return new PgServers(pg);
  }

  static HikariDataSource pool(String jdbcUrl, int size, Duration timeout) {
    HikariConfig c = new HikariConfig();
    c.setJdbcUrl(jdbcUrl);
    c.setUsername(PostgresServer.USER);
    c.setMaximumPoolSize(size);
    c.setConnectionTimeout(Math.max(250, timeout.toMillis()));
    // A server that stops answering (SIGSTOP of a worker holds locks, not the server; a crashed
    // server refuses) must not hang a worker forever.
    c.addDataSourceProperty("socketTimeout", Math.max(1, timeout.toSeconds() * 2));
    c.addDataSourceProperty("connectTimeout", Math.max(1, timeout.toSeconds()));
    c.setInitializationFailTimeout(-1); // start even while the server restarts
    return new HikariDataSource(c);
  }

  @Override
  public PaymentBackend connect(String address, Writes writes, boolean settler) {
    PaymentStore.requireFencedCompletion("postgres", writes);
    Duration timeout = Duration.ofSeconds(settler ? 30 : 2);
    HikariDataSource pool = pool(address, 8, timeout);
    PostgresKeyStore store =
        PostgresKeyStore.builder(pool)
            .lockTimeout(timeout)
            .statementTimeout(timeout)
            .retention(Duration.ofHours(1))
            .build();
    return new Backend(pool, store);
  }

  /** The server and its fault. */
  private static final class PgServers implements Servers {
    private final PostgresServer pg;

    PgServers(PostgresServer pg) {
      this.pg = pg;
    }

    @Override
    public String workerAddress() {
      return pg.jdbcUrl();
    }

    @Override
    public String directAddress() {
      return pg.jdbcUrl();
    }

    @Override
    public List<Fault> faults() {
      return List.of(new Fault("immediate shutdown of postgres", this::crashAndRestart));
    }

    private boolean crashAndRestart(Random random) throws InterruptedException {
      pg.crash();
      Thread.sleep(200 + random.nextInt(800));
      pg.start();
      return true;
    }

    @Override
    public void close() {
      pg.close();
    }
  }

  /** Payments in transactions of the transactional mode; reads for the checker. */
  private static final class Backend implements PaymentBackend {
    private final HikariDataSource pool;
    private final PostgresKeyStore store;

    Backend(HikariDataSource pool, PostgresKeyStore store) {
      this.pool = pool;
      this.store = store;
    }

    @Override
    public Claim acquire(Payment p, Duration inProgress) {
      Optional<KeyState> k = key(p);
      if (k.isPresent() && k.get().completed()) {
        return new Claim.Done(k.get().response());
      }
      // The transactional mode decides in pay, under the key's lock: token 0 stands for "the one
      // the transaction draws".
      return new Claim.Owned(0);
    }

    @Override
    public Attempt pay(Payment p, long token) {
      try (Connection c = pool.getConnection()) {
        byte[] response =
            store.inTransaction(
                c,
                p.idempotencyKey(),
                Fingerprint.of(p.fingerprint()),
                (tx, drawn) -> {
                  try (PreparedStatement s =
                      tx.prepareStatement(
                          "INSERT INTO payments_ledger (account, entry) VALUES (?, ?)")) {
                    s.setInt(1, p.account());
                    s.setString(2, p.entry(drawn));
                    s.executeUpdate();
                  }
                  return p.response(drawn).getBytes(StandardCharsets.UTF_8);
                });
        return new Attempt.Paid(new String(response, StandardCharsets.UTF_8));
      } catch (KeyInProgressException e) {
        throw new Unavailable("payment " + p.i() + ": in progress elsewhere", e);
      } catch (KeyMismatchException e) {
        throw new IllegalStateException("payment " + p.i() + ": " + e.getMessage(), e);
      } catch (KeyStoreException | SQLException e) {
        throw new Unavailable("payment " + p.i() + ": " + e.getMessage(), e);
      } catch (Exception e) {
        throw new Unavailable("payment " + p.i() + ": " + e, e);
      }
    }

    @Override
    public List<String> ledger(int account) {
      try (Connection c = pool.getConnection();
          PreparedStatement s =
              c.prepareStatement(
                  "SELECT entry FROM payments_ledger WHERE account = ? ORDER BY id")) {
        s.setInt(1, account);
        List<String> out = new ArrayList<>();
        try (ResultSet r = s.executeQuery()) {
          while (r.next()) {
            out.add(r.getString(1));
          }
        }
        return out;
      } catch (SQLException e) {
        throw new Unavailable("ledger " + account + ": " + e.getMessage(), e);
      }
    }

    @Override
    public Optional<KeyState> key(Payment p) {
      try (Connection c = pool.getConnection();
          PreparedStatement s =
              c.prepareStatement(
                  "SELECT state, token, response FROM idem_keys WHERE scope = ? AND key = ?")) {
        s.setString(1, IdemPayments.SCOPE);
        s.setString(2, p.key());
        try (ResultSet r = s.executeQuery()) {
          if (!r.next()) {
            return Optional.empty();
          }
          boolean completed = "completed".equals(r.getString(1));
          byte[] stored = r.getBytes(3);
          String response = null;
          if (completed && stored != null && stored.length > 0 && stored[0] == 0) {
            response =
                new String(Arrays.copyOfRange(stored, 1, stored.length), StandardCharsets.UTF_8);
          }
          return Optional.of(new KeyState(completed, r.getLong(2), response));
        }
      } catch (SQLException e) {
        throw new Unavailable("key " + p.key() + ": " + e.getMessage(), e);
      }
    }

    @Override
    public void close() {
      store.close();
      pool.close();
    }
  }
}
