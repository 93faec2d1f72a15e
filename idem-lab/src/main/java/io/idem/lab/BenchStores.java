package io.idem.lab;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import io.idem.client.IdemTransport;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.PostgresServer;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * Where one bench run's operations go: an Idem cluster (at given addresses or in process), etcd, or
 * a private redis-server or PostgreSQL server that this class starts, and stops after the run. Each
 * {@code on*} method provisions its target, hands it to the measurement, releases it, and returns
 * the run's exit code. One instance serves one run.
 */
final class BenchStores {
  /** The most lanes (threads) --store postgres runs: the defaults' 64 x 32, and twice that. */
  static final int MAX_PG_LANES = 4096;

  /** Settings that would make the PostgreSQL bench measure a store that can lose commits. */
  static final List<String> DURABILITY_SETTINGS =
      List.of("fsync", "synchronous_commit", "full_page_writes");

  /** Connections the bench keeps beyond its pool's on the private PostgreSQL (its own checks). */
  static final int PG_SPARE_CONNECTIONS = 10;

  /**
   * The private PostgreSQL's settings by default: no checkpoint during a run, and commit_delay so
   * that more commits share each WAL flush (docs/PERFORMANCE.md, the PostgreSQL key store).
   */
  static final String PG_SETTINGS =
      "max_wal_size=4GB,checkpoint_timeout=30min,commit_delay=1000,commit_siblings=4";

  /** Measures a run against a target that is ready: {@link BenchRun#measure}. */
  @FunctionalInterface
  interface Measure {
    BenchRun.Result measure(BenchTarget target) throws InterruptedException;
  }

  private final BenchSettings settings;
  private final String run;
  private final PrintWriter out;
  private final PrintWriter err;
  private final Measure measure;

  /**
   * @param run tells this run's keys from an earlier run's against the same cluster or server
   * @param measure runs the measurement on each target provisioned here
   */
  BenchStores(
      BenchSettings settings, String run, PrintWriter out, PrintWriter err, Measure measure) {
    this.settings = settings;
    this.run = run;
    this.out = out;
    this.err = err;
    this.measure = measure;
  }

  /**
   * The server settings for {@code --pg-settings} (name=value,...), with max_connections raised to
   * fit a pool of {@code pool} unless the settings name it.
   *
   * @throws IllegalArgumentException naming the option and the setting that is malformed or that
   *     would turn off durability
   */
  static List<String> postgresSettings(String pgSettings, int pool) {
    List<String> settings = new ArrayList<>();
    boolean namesConnections = false;
    for (String part : pgSettings.split(",")) {
      String setting = part.strip();
      if (setting.isEmpty()) {
        continue;
      }
      int eq = setting.indexOf('=');
      if (eq < 1 || eq == setting.length() - 1) {
        throw new IllegalArgumentException(
            "--pg-settings: expected name=value, got '" + setting + "'");
      }
      String name = setting.substring(0, eq).strip().toLowerCase(Locale.ROOT);
      if (DURABILITY_SETTINGS.contains(name)) {
        throw new IllegalArgumentException(
            "--pg-settings: the bench keeps "
                + String.join(", ", DURABILITY_SETTINGS)
                + " on; got '"
                + setting
                + "'");
      }
      if (name.equals("max_connections")) {
        namesConnections = true;
      }
      settings.add(setting);
    }
    if (!namesConnections && pool + PG_SPARE_CONNECTIONS > PostgresServer.MAX_CONNECTIONS) {
      settings.add("max_connections=" + (pool + PG_SPARE_CONNECTIONS)); // the pool's, and ours
    }
    return settings;
  }

  /**
   * Runs on the Idem cluster at {@code addresses}: one client per session on one shared transport,
   * the first of which probes the cluster within {@code probeTimeout}.
   */
  int onIdem(String addresses, ClientTls clientTls, Duration probeTimeout) throws Exception {
    List<IdemClient> clients = new ArrayList<>();
    try (IdemTransport transport =
        clientTls == null ? IdemTransport.create() : IdemTransport.create(clientTls)) {
      try {
        IdemClient probe =
            IdemClient.builder()
                .servers(addresses)
                .transport(transport)
                .requestTimeout(probeTimeout)
                .build();
        clients.add(probe);
        probe.put("bench/probe", new byte[0]); // fails fast, in one line, if nobody answers
        for (int i = 1; i < settings.sessions(); i++) {
          clients.add(
              IdemClient.builder()
                  .servers(addresses)
                  .transport(transport)
                  .window(settings.window())
                  .build());
        }
        IdemTarget target = new IdemTarget(clients, settings, run);
        target.prepare();
        return measure.measure(target).code();
      } finally {
        for (IdemClient c : clients) {
          c.close();
        }
      }
    }
  }

  /**
   * Starts an in-process cluster of {@code nodes} in a temporary directory, runs on it, stops it
   * and deletes the directory.
   */
  int onLocal(int nodes, Duration probeTimeout) throws Exception {
    Path dir = Files.createTempDirectory("idem-bench");
    // One anonymous principal runs the whole load: bootstrap the cluster with quotas to match (the
    // keys workload holds about throughput x retention key records).
    try (LocalCluster cluster =
        LocalCluster.start(
            nodes,
            dir,
            b ->
                b.bootstrapQuotas(
                    io.idem.proto.Quotas.newBuilder()
                        .setKeyRecords(2_000_000)
                        .setKeyBytes(1L << 30)
                        .build()))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      return onIdem(String.join(",", cluster.clientAddresses()), null, probeTimeout);
    } finally {
      deleteTree(dir);
    }
  }

  /** Runs plain puts through jetcd on the etcd cluster at {@code servers}. */
  int onEtcd(String servers) throws Exception {
    try (EtcdTarget etcd = EtcdTarget.connect(servers, settings.valueSize(), settings.workload())) {
      etcd.probe(); // fails fast, in one line, if nobody answers
      etcd.prepare();
      return measure.measure(etcd).code();
    }
  }

  /** Runs the same puts through the ZooKeeper client on the ensemble at {@code servers}. */
  int onZooKeeper(String servers, Duration timeout) throws Exception {
    try (ZooKeeperTarget zk =
        ZooKeeperTarget.connect(
            servers,
            settings.valueSize(),
            settings.workload(),
            settings.sessions(),
            timeout.toMillis())) {
      zk.prepare();
      return measure.measure(zk).code();
    }
  }

  /**
   * Starts a private redis-server in a temporary directory, runs the keys workload on it through
   * the Redis store or seed 001, stops it (by PID) and deletes the directory.
   */
  int onRedis(BenchCommand.Store store, String redisServer, RedisServer.Aof aof) throws Exception {
    Path dir = Files.createTempDirectory("idem-bench-redis");
    try (RedisServer redis = RedisServer.start(redisServer, dir, aof)) {
      RedisClient client =
          RedisClient.create(
              RedisURI.builder(RedisURI.create(redis.uri()))
                  .withTimeout(Duration.ofSeconds(10))
                  .build());
      client.setOptions(
          ClientOptions.builder()
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .timeoutOptions(TimeoutOptions.enabled(Duration.ofSeconds(10)))
              .build());
      out.printf(
          "%s on a private %s (pid %d, %s), appendfsync %s, data in %s%n",
          store, redisServer, redis.pid(), redis.uri(), aof.name().toLowerCase(Locale.ROOT), dir);
      try (BenchTarget t =
          store == BenchCommand.Store.redis
              ? new RedisStoreTarget(
                  client,
                  settings.sessions(),
                  run,
                  BenchSettings.KEY_IN_PROGRESS,
                  settings.keyRetention(),
                  settings.valueSize(),
                  settings.ledger())
              : new Seed001Target(
                  client,
                  settings.sessions(),
                  run,
                  BenchSettings.KEY_IN_PROGRESS.toMillis(),
                  settings.ledger())) {
        return measure.measure(t).code();
      } finally {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    } finally {
      deleteTree(dir);
    }
  }

  /**
   * Starts a private PostgreSQL server (fsync on) with {@code pgSettings} in a temporary directory,
   * runs the keys workload on it through the PostgreSQL key store in {@code mode} over a pool of
   * {@code pool} connections, checks what the database holds against what was acknowledged, and
   * stops the server (by PID) and deletes its directory.
   */
  int onPostgres(List<String> pgSettings, PostgresStoreTarget.Mode mode, int pool)
      throws Exception {
    PostgresServer started;
    try {
      started = PostgresServer.create(PostgresServer.Durability.DURABLE, pgSettings);
    } catch (RuntimeException e) {
      // initdb or the server failed (binaries missing, a bad setting): the log's last lines
      err.println("idem: cannot start PostgreSQL: " + e.getMessage().strip().replace('\n', ' '));
      return 1;
    }
    try (PostgresServer pg = started;
        HikariDataSource connections = pg.pool(pool, 30_000)) {
      out.printf(
          "postgres (%s mode) on a private %s (pid %d), pool %d, %d lanes%n",
          mode, pg.describe(), pg.pid(), pool, settings.lanes());
      PostgresStoreTarget t;
      try {
        t =
            new PostgresStoreTarget(
                connections,
                mode,
                settings.lanes(),
                run,
                BenchSettings.KEY_IN_PROGRESS,
                settings.keyRetention(),
                settings.valueSize());
      } catch (IllegalArgumentException e) {
        err.println("idem: " + e.getMessage());
        return 2;
      }
      try (t) {
        BenchRun.Result result = measure.measure(t);
        if (result.inFlight() > 0) {
          err.println(
              "idem: the database is not checked: "
                  + result.inFlight()
                  + " operations were still running 30 s after the end");
          return 1;
        }
        String wrong = t.check(result.errors());
        if (wrong != null) {
          err.println("idem: the database disagrees: " + wrong);
          return 1;
        }
        out.println("checked: " + t.counts());
        return result.code();
      }
    }
  }

  /** Deletes {@code dir} and everything under it. */
  private static void deleteTree(Path dir) throws IOException {
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    }
  }
}
