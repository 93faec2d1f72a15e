package io.idem.lab;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.testkit.stores.PostgresServer;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The PostgreSQL bench target on a private server: its operations write what they should, and its
 * check of the database fails when the database holds anything else than the acknowledged
 * operations' records.
 */
@Timeout(120)
class PostgresStoreTargetTest {
  private static PostgresServer server;
  private static HikariDataSource pool;

  @BeforeAll
  static void start() {
    server = PostgresServer.startFast();
    pool = server.pool(4, 10_000);
  }

  @AfterAll
  static void stop() {
    if (pool != null) {
      pool.close();
    }
    if (server != null) {
      server.close();
    }
  }

  private static PostgresStoreTarget target(PostgresStoreTarget.Mode mode, String run) {
    return new PostgresStoreTarget(
        pool, mode, 4, run, Duration.ofSeconds(30), Duration.ofMinutes(1), 10);
  }

  private static void execute(String sql) throws Exception {
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement()) {
      s.execute(sql);
    }
  }

  /** Empties what an earlier test's target wrote (the target made the tables). */
  private static void fresh() throws Exception {
    execute("DELETE FROM bench_payments");
    execute("DELETE FROM idem_keys");
  }

  private static void operations(PostgresStoreTarget t, int n) throws Exception {
    CompletableFuture<?>[] ops = new CompletableFuture<?>[n];
    for (int i = 0; i < n; i++) {
      ops[i] = t.op(i % 2, i);
    }
    CompletableFuture.allOf(ops).get(60, TimeUnit.SECONDS);
  }

  @Test
  void theTransactionalCheckFailsOnAPaymentOrAKeyRecordThatNoOperationAcknowledged()
      throws Exception {
    try (PostgresStoreTarget t = target(PostgresStoreTarget.Mode.transactional, "tx")) {
      fresh();
      operations(t, 10);
      assertThat(t.check(0)).isNull();
      assertThat(t.counts()).isEqualTo("10 acknowledged, 10 completed keys, 10 payments");

      execute("INSERT INTO bench_payments (idem_key, token) VALUES ('stray', 1)");
      assertThat(t.check(0)).contains("10 completed keys").contains("11 payments");
      execute("DELETE FROM bench_payments WHERE idem_key = 'stray'");
      assertThat(t.check(0)).isNull();

      // A key in progress cannot outlive a transaction of the transactional mode.
      execute(
          "INSERT INTO idem_keys (scope, key, fingerprint, state, token, deadline, retention,"
              + " expires_at) VALUES ('bench', 'stray', '', 'in_progress', 999, now(),"
              + " interval '1 minute', now() + interval '1 minute')");
      assertThat(t.check(0)).contains("11 key records");
      // A failed operation may have committed, but it leaves a payment with its key.
      assertThat(t.check(1)).contains("11 key records");
    }
  }

  @Test
  void theStandardCheckFailsOnAMissingCompletedKeyOrAnyPayment() throws Exception {
    try (PostgresStoreTarget t = target(PostgresStoreTarget.Mode.standard, "std")) {
      fresh();
      operations(t, 10);
      assertThat(t.check(0)).isNull();
      assertThat(t.counts()).isEqualTo("10 acknowledged, 10 completed keys, 0 payments");

      execute("INSERT INTO bench_payments (idem_key, token) VALUES ('stray', 1)");
      assertThat(t.check(0)).contains("1 payments");
      execute("DELETE FROM bench_payments");
      assertThat(t.check(0)).isNull();

      execute("DELETE FROM idem_keys WHERE key = (SELECT min(key) FROM idem_keys)");
      assertThat(t.check(0)).contains("10 acknowledged").contains("9 completed keys");
    }
  }
}
