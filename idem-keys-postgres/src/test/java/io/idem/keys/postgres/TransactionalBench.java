package io.idem.keys.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.testkit.stores.PostgresServer;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Throughput of the transactional mode on a private server on this machine: closed loops, each
 * operation a new key, its acquisition, one business insert and its completion in one transaction
 * (one commit, synchronous_commit on). Not part of the default run (tag {@code bench}):
 *
 * <pre>
 * nice -n 15 ./mvnw -B -q -pl idem-keys,idem-keys-postgres -am verify -Dspotless.check.skip=true \
 *   -Djacoco.skip=true -Didem.pg.excludedGroups= -Dgroups=bench -Dtest=TransactionalBench \
 *   -Dsurefire.failIfNoSpecifiedTests=false [-Didem.bench.workers=64 -Didem.bench.pool=16 \
 *   -Didem.bench.seconds=20 -Didem.bench.warmup=5 -Didem.bench.durable=true \
 *   -Didem.bench.pg=NAME=VALUE,...]
 * </pre>
 *
 * (without {@code -Djacoco.skip=true} the coverage agent costs this JVM about a third more CPU) or,
 * with the test classpath, {@code java -Didem.bench.workers=64 ... -cp ...
 * io.idem.keys.postgres.TransactionalBench}. It prints one line per run: throughput, latency
 * percentiles (from taking a connection of the pool to the commit), and the server's settings; and
 * checks that every acknowledged operation wrote exactly one business row, and that none failed.
 */
@Tag("bench")
public class TransactionalBench {

  /**
   * Connections: more than this made each operation cost more CPU on 2 shared cores (context
   * switches, lock waits); fewer cap the commits that share one WAL flush.
   */
  static final int DEFAULT_POOL = 16;

  /**
   * Server settings beyond PostgreSQL's defaults: no checkpoint during a run, and commit_delay so
   * that more commits share each WAL flush (fsync stays on, synchronous_commit on).
   */
  static final String DEFAULT_SETTINGS =
      "max_wal_size=4GB,checkpoint_timeout=30min,commit_delay=1000,commit_siblings=4";

  /** The same run without Maven: {@code java -cp <test classpath> ...TransactionalBench}. */
  public static void main(String[] args) throws Exception {
    new TransactionalBench().keyedTransactions();
  }

  @Test
  @Timeout(600)
  void keyedTransactions() throws Exception {
    int workers = Integer.getInteger("idem.bench.workers", 64);
    int poolSize = Integer.getInteger("idem.bench.pool", DEFAULT_POOL);
    int seconds = Integer.getInteger("idem.bench.seconds", 20);
    int warmup = Integer.getInteger("idem.bench.warmup", 5);
    boolean durable = Boolean.parseBoolean(System.getProperty("idem.bench.durable", "true"));
    String pg = System.getProperty("idem.bench.pg", DEFAULT_SETTINGS);
    List<String> settings =
        pg.isBlank()
            ? List.of()
            : Arrays.stream(pg.split(",")).map(String::trim).filter(s -> !s.isEmpty()).toList();

    try (PostgresServer server =
            PostgresServer.create(
                durable ? PostgresServer.Durability.DURABLE : PostgresServer.Durability.FAST,
                settings);
        HikariDataSource pool = server.pool(poolSize, 30_000);
        PostgresKeyStore store = PostgresKeyStore.builder(pool).purgeEvery(Duration.ZERO).build()) {
      store.migrate();
      try (Connection c = pool.getConnection();
          Statement s = c.createStatement()) {
        s.execute(
            "CREATE TABLE payments (id bigserial PRIMARY KEY, idem_key text NOT NULL,"
                + " amount bigint NOT NULL, token bigint NOT NULL)");
      }
      Run run = new Run(store, pool, workers);
      run.phase(Duration.ofSeconds(warmup));
      long jvmBefore = jvmCpuNanos();
      long serverBefore = serverCpuNanos(server.pid());
      Result r = run.phase(Duration.ofSeconds(seconds));
      double jvmUs = (jvmCpuNanos() - jvmBefore) / 1e3 / r.ops;
      double serverUs = (serverCpuNanos(server.pid()) - serverBefore) / 1e3 / r.ops;
      long rows = count(pool, "SELECT count(*) FROM payments");
      long keys = count(pool, "SELECT count(*) FROM idem_keys WHERE state = 'completed'");
      System.out.printf(
          "transactional keys: %d workers, pool %d, %d s: %.0f ops/s, p50 %.2f ms, p99 %.2f ms,"
              + " p99.9 %.2f ms, max %.2f ms; %d ops, %d failed; CPU per op: %.0f us in this JVM,"
              + " %.0f us in the server (%.0f ops/s on 2 cores of our own); %s; load average %s%n",
          workers,
          poolSize,
          seconds,
          r.ops / r.seconds,
          r.histogram.getValueAtPercentile(50) / 1000.0,
          r.histogram.getValueAtPercentile(99) / 1000.0,
          r.histogram.getValueAtPercentile(99.9) / 1000.0,
          r.histogram.getMaxValue() / 1000.0,
          r.ops,
          run.failures.get(),
          jvmUs,
          serverUs,
          2e6 / (jvmUs + serverUs),
          server.describe(),
          loadAverage());
      assertThat(run.failures.get()).isZero();
      assertThat(rows).isEqualTo(keys).isEqualTo(run.acknowledged.get());
      assertThat(r.ops).isPositive();
    }
  }

  /** The closed loops: each worker runs one operation after the other on a new key. */
  static final class Run {
    final PostgresKeyStore store;
    final HikariDataSource pool;
    final int workers;
    final AtomicLong acknowledged = new AtomicLong();
    final AtomicLong failures = new AtomicLong();
    private final AtomicLong next = new AtomicLong();

    Run(PostgresKeyStore store, HikariDataSource pool, int workers) {
      this.store = store;
      this.pool = pool;
      this.workers = workers;
    }

    Result phase(Duration length) throws Exception {
      ExecutorService threads = Executors.newFixedThreadPool(workers);
      AtomicBoolean running = new AtomicBoolean(true);
      CountDownLatch go = new CountDownLatch(1);
      List<Future<Histogram>> loops = new ArrayList<>();
      for (int w = 0; w < workers; w++) {
        loops.add(threads.submit(() -> loop(go, running)));
      }
      long start = System.nanoTime();
      go.countDown();
      Thread.sleep(length.toMillis());
      running.set(false);
      Histogram all = new Histogram(3);
      for (Future<Histogram> f : loops) {
        all.add(f.get(60, TimeUnit.SECONDS));
      }
      double elapsed = (System.nanoTime() - start) / 1e9;
      threads.shutdownNow();
      return new Result(all.getTotalCount(), elapsed, all);
    }

    private Histogram loop(CountDownLatch go, AtomicBoolean running) throws Exception {
      Histogram h = new Histogram(3);
      go.await();
      while (running.get()) {
        long n = next.incrementAndGet();
        IdempotencyKey key = new IdempotencyKey("bench", "payment-" + n);
        byte[] body = ("pay " + n + " EUR").getBytes(StandardCharsets.UTF_8);
        long t0 = System.nanoTime();
        try (Connection c = pool.getConnection()) {
          store.inTransaction(
              c, key, Fingerprint.of(body), (conn, token) -> pay(conn, key, n, token));
          acknowledged.incrementAndGet();
          h.recordValue((System.nanoTime() - t0) / 1000);
        } catch (Exception e) {
          if (failures.incrementAndGet() <= 5) {
            System.out.println("bench operation failed: " + e);
          }
        }
      }
      return h;
    }

    private static byte[] pay(Connection c, IdempotencyKey key, long amount, long token)
        throws SQLException {
      try (PreparedStatement s =
          c.prepareStatement(
              "INSERT INTO payments (idem_key, amount, token) VALUES (?, ?, ?) RETURNING id")) {
        s.setString(1, key.key());
        s.setLong(2, amount);
        s.setLong(3, token);
        try (ResultSet r = s.executeQuery()) {
          r.next();
          return ("payment " + r.getLong(1)).getBytes(StandardCharsets.UTF_8);
        }
      }
    }
  }

  record Result(long ops, double seconds, Histogram histogram) {}

  static long count(HikariDataSource pool, String sql) throws SQLException {
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getLong(1);
    }
  }

  /** CPU time of this JVM. */
  static long jvmCpuNanos() {
    return ((com.sun.management.OperatingSystemMXBean)
            java.lang.management.ManagementFactory.getOperatingSystemMXBean())
        .getProcessCpuTime();
  }

  /** CPU time (user and system) of the postmaster and its children, from /proc. */
  static long serverCpuNanos(long postmaster) throws java.io.IOException {
    long ticks = 0;
    try (java.util.stream.Stream<java.nio.file.Path> procs =
        java.nio.file.Files.list(java.nio.file.Path.of("/proc"))) {
      for (java.nio.file.Path p : procs.toList()) {
        if (!p.getFileName().toString().matches("\\d+")) {
          continue;
        }
        String stat;
        try {
          stat = java.nio.file.Files.readString(p.resolve("stat"));
        } catch (java.io.IOException gone) {
          continue;
        }
        // Fields after the command name, which is in parentheses and may hold spaces.
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        long pid = Long.parseLong(p.getFileName().toString());
        long ppid = Long.parseLong(f[1]);
        if (pid == postmaster || ppid == postmaster) {
          ticks += Long.parseLong(f[11]) + Long.parseLong(f[12]); // utime, stime
        }
      }
    }
    return ticks * 10_000_000L; // USER_HZ is 100 on Linux
  }

  static String loadAverage() {
    try {
      return java.nio.file.Files.readString(java.nio.file.Path.of("/proc/loadavg")).trim();
    } catch (java.io.IOException e) {
      return "unknown";
    }
  }
}
