package io.idem.lab;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.cli.DurationConverter;
import io.idem.cli.Errors;
import io.idem.cli.TlsOptions;
import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import io.idem.client.IdemTransport;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeySettlement;
import io.idem.client.Write;
import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.PostgresServer;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem bench}: many sessions, each pipelining exactly-once writes, against {@code --servers}
 * or an in-process cluster ({@code --local N}). Prints throughput and latency percentiles
 * (HdrHistogram); the last line is JSON. With {@code --workload keys}, {@code --store} chooses
 * where the keys live: Idem, or the Redis store or seed 001's algorithm on a private redis-server
 * the bench starts, in the same closed loops with the same report.
 */
@Command(
    name = "bench",
    mixinStandardHelpOptions = true,
    description = "Measures exactly-once write throughput and latency; the last line is JSON.")
final class BenchCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  enum Workload {
    put,
    incr,
    append,
    mixed,
    keys
  }

  /** The scope of the keys workload's idempotency keys. */
  static final String KEY_SCOPE = "bench";

  /** How long the keys workload's owner holds a key: far longer than an acquire and a complete. */
  static final Duration KEY_IN_PROGRESS = Duration.ofSeconds(30);

  /** The cluster's bound on a key's stored response (docs/PROTOCOL.md). */
  static final int MAX_KEY_RESPONSE_BYTES = 64 * 1024;

  @Mixin TlsOptions tls = new TlsOptions();

  @Option(
      names = "--servers",
      defaultValue = "${env:IDEM_SERVERS:-127.0.0.1:7001}",
      description =
          "Client addresses of the cluster. Ignored with --local. Default: ${DEFAULT-VALUE}.")
  String servers;

  enum Target {
    idem,
    etcd
  }

  @Option(
      names = "--target",
      defaultValue = "idem",
      description =
          "idem, or etcd: the same closed loops as plain puts through jetcd against the etcd"
              + " cluster at --servers (bench/compare-etcd.sh). Default: ${DEFAULT-VALUE}.")
  Target target;

  @Option(
      names = "--local",
      defaultValue = "0",
      description = "Run an in-process cluster of this many nodes (1-5) instead.")
  int local;

  @Option(
      names = "--timeout",
      defaultValue = "15s",
      converter = DurationConverter.class,
      description =
          "How long the first write may take (connections, TLS handshakes, registration) before"
              + " the bench gives up on the cluster. Default: ${DEFAULT-VALUE}.")
  Duration probeTimeout;

  @Option(
      names = "--sessions",
      defaultValue = "64",
      description = "Concurrent sessions (clients). Default: ${DEFAULT-VALUE}.")
  int sessions;

  @Option(
      names = "--window",
      defaultValue = "32",
      description = "Writes in flight per session. Default: ${DEFAULT-VALUE}.")
  int window;

  @Option(
      names = "--workload",
      defaultValue = "put",
      description =
          "put, incr, append, mixed, or keys: each operation acquires a new idempotency key and"
              + " completes it with a --value-size response (two writes, one latency)."
              + " Default: ${DEFAULT-VALUE}.")
  Workload workload;

  @Option(
      names = "--key-retention",
      defaultValue = "1m",
      converter = DurationConverter.class,
      description =
          "How long the keys workload's completed records are kept: the servers hold about"
              + " throughput x retention records. Default: ${DEFAULT-VALUE}.")
  Duration keyRetention;

  enum Store {
    idem,
    redis,
    seed001,
    postgres
  }

  @Option(
      names = "--store",
      split = ",",
      defaultValue = "idem",
      description =
          "With --workload keys: idem (the cluster at --servers or --local), redis (the Redis key"
              + " store) or seed001 (seed 001's TryAcquire and Confirm, the broken baseline), both"
              + " on a private redis-server the bench starts and stops, or postgres (the PostgreSQL"
              + " key store, see --pg-mode) on a private PostgreSQL server the bench starts and"
              + " stops. Several, comma-separated, run one after the other with the same loops"
              + " (each on a new private server), and a summary compares them with the last one"
              + " listed. Default: ${DEFAULT-VALUE}.")
  List<Store> stores;

  @Option(
      names = "--rounds",
      defaultValue = "1",
      description =
          "With --workload keys: run the stores of --store this many times, alternating (1-100),"
              + " then sum each store's throughput over the rounds. Default: ${DEFAULT-VALUE}.")
  int rounds;

  /** The store of the run in progress: one of {@link #stores}. */
  private Store store;

  @Option(
      names = "--pg-mode",
      defaultValue = "transactional",
      description =
          "With --store postgres: transactional (the key's decision, one business INSERT and the"
              + " completion in one transaction on a pooled connection, one thread per lane) or"
              + " standard (acquire, then complete; no business write). Default: ${DEFAULT-VALUE}.")
  PostgresStoreTarget.Mode pgMode;

  @Option(
      names = "--pg-pool",
      defaultValue = "16",
      description =
          "With --store postgres: connections in the pool that every lane shares (1-1024)."
              + " Default: ${DEFAULT-VALUE}.")
  int pgPool;

  @Option(
      names = "--pg-settings",
      defaultValue = PG_SETTINGS,
      description =
          "With --store postgres: the private server's settings beyond PostgreSQL's defaults, as"
              + " name=value,... (fsync, synchronous_commit and full_page_writes stay on; '' for"
              + " none). Its binaries:"
              + " $IDEM_PG_BIN, else pg_config --bindir, else the newest /usr/lib/postgresql/*/bin."
              + " Default: ${DEFAULT-VALUE}.")
  String pgSettings;

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

  @Option(
      names = "--redis-server",
      defaultValue = RedisServer.DEFAULT_BINARY,
      description = "The redis-server binary for --store redis|seed001. Default: ${DEFAULT-VALUE}.")
  String redisServer;

  @Option(
      names = "--appendfsync",
      defaultValue = "everysec",
      description =
          "The private redis-server's AOF: always, everysec or no (appendonly yes with that"
              + " appendfsync), or off (no AOF). Default: ${DEFAULT-VALUE}.")
  String appendfsync;

  @Option(
      names = "--ledger",
      description =
          "With --workload keys: each keyed operation also appends an entry to a ledger list, the"
              + " business step's write: in the completion on Idem (an append effect) and on the"
              + " Redis store (an RPUSH effect), as a command of its own between TryAcquire and"
              + " Confirm on seed001.")
  boolean ledger;

  /** The operations that failed in the last {@link #measure}. */
  private long lastErrors;

  /** The operations still in flight when the last {@link #measure} gave up waiting for them. */
  private long lastInFlight;

  /** What the last {@link #measure} reported, for {@link #sideBySide}. */
  private RunResult lastResult;

  private record RunResult(double opsPerSecond, double p50, double p99, double p999) {}

  /**
   * Tells this run's keys from an earlier run's against the same cluster: new for every run, since
   * each run numbers its operations from 0 (the rounds of a side-by-side run share a cluster).
   */
  private String run = newRunId();

  private static String newRunId() {
    return Long.toHexString(ThreadLocalRandom.current().nextLong());
  }

  @Option(
      names = "--value-size",
      defaultValue = "100",
      description = "Bytes per value. Default: ${DEFAULT-VALUE}.")
  int valueSize;

  @Option(
      names = "--duration",
      defaultValue = "10s",
      converter = DurationConverter.class,
      description = "How long to measure. Default: ${DEFAULT-VALUE}.")
  Duration duration;

  @Option(
      names = "--warmup",
      defaultValue = "3s",
      converter = DurationConverter.class,
      description =
          "Load before measuring, not counted (JIT, connections). Servers started just before"
              + " need one to two minutes of load on two cores before their JIT compilers are done"
              + " (docs/PERFORMANCE.md). Default: ${DEFAULT-VALUE}.")
  Duration warmup;

  @Option(
      names = "--timeline",
      paramLabel = "FILE",
      description =
          "Also write one CSV line per second of the measured window to FILE (appended, with a"
              + " header per run): the second's end (UTC), the operations that completed in it, and"
              + " their p50, p99 and max latency in ms. To match slow seconds with the servers'"
              + " logs (collections, snapshots).")
  Path timeline;

  @Override
  public Integer call() throws Exception {
    if (sessions < 1
        || sessions > 10_000
        || window < 1
        || window > 4096
        || valueSize < 0
        || valueSize > 1024 * 1024
        || local < 0
        || local > 5
        || probeTimeout.isNegative()
        || probeTimeout.isZero()) {
      spec.commandLine()
          .getErr()
          .println(
              "idem: out of range: --sessions 1-10000, --window 1-4096, --value-size 0-1048576, --local 0-5, --timeout above 0");
      return 2;
    }
    if (workload == Workload.keys && valueSize > MAX_KEY_RESPONSE_BYTES) {
      spec.commandLine()
          .getErr()
          .println(
              "idem: --workload keys stores --value-size bytes as each key's response: at most "
                  + MAX_KEY_RESPONSE_BYTES);
      return 2;
    }
    if (ledger && workload != Workload.keys) {
      spec.commandLine().getErr().println("idem: --ledger applies to --workload keys");
      return 2;
    }
    if (timeline != null) {
      Path dir = timeline.toAbsolutePath().getParent();
      if (Files.isDirectory(timeline) || !Files.isDirectory(dir) || !Files.isWritable(dir)) {
        spec.commandLine()
            .getErr()
            .println("idem: --timeline " + timeline + ": not a file in a writable directory");
        return 2;
      }
    }
    ClientTls clientTls;
    try {
      clientTls = tls.tls();
    } catch (IllegalArgumentException e) {
      spec.commandLine().getErr().println("idem: " + e.getMessage());
      return 2;
    }
    if (rounds < 1 || rounds > 100) {
      spec.commandLine().getErr().println("idem: out of range: --rounds 1-100");
      return 2;
    }
    if (stores.size() == 1 && rounds == 1) {
      return one(stores.get(0), clientTls, true);
    }
    if (workload != Workload.keys) {
      spec.commandLine()
          .getErr()
          .println("idem: several stores, or --rounds, apply to --workload keys");
      return 2;
    }
    if (stores.stream().distinct().count() < stores.size()) {
      spec.commandLine().getErr().println("idem: --store names a store twice: " + stores);
      return 2;
    }
    for (Store s : stores) {
      int invalid = one(s, clientTls, false); // every store's options, before any runs
      if (invalid != 0) {
        return invalid;
      }
    }
    return sideBySide(clientTls);
  }

  /**
   * Checks the options for one run on store {@code s} and, if {@code go}, runs it: 2 for options
   * that do not fit, else (with {@code go}) the run's exit code, or 0.
   */
  private int one(Store s, ClientTls clientTls, boolean go) throws Exception {
    store = s;
    if (go) {
      run = newRunId();
    }
    if (clientTls != null && (local != 0 || target != Target.idem || store != Store.idem)) {
      spec.commandLine()
          .getErr()
          .println(
              "idem: --tls-* apply to an Idem cluster at --servers (not --local, etcd or redis)");
      return 2;
    }
    if (store == Store.postgres) {
      if (workload != Workload.keys || target != Target.idem || local != 0) {
        spec.commandLine()
            .getErr()
            .println("idem: --store postgres runs the keys workload on its own PostgreSQL only");
        return 2;
      }
      if (ledger) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: --ledger applies to --store idem, redis or seed001 (--store postgres writes"
                    + " a payment row in each operation of --pg-mode transactional)");
        return 2;
      }
      if (pgPool < 1 || pgPool > 1024) {
        spec.commandLine().getErr().println("idem: out of range: --pg-pool 1-1024");
        return 2;
      }
      if (keyRetention.compareTo(PostgresKeyStore.DEFAULT_MAX_RETENTION) > 0) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: --key-retention: at most "
                    + PostgresKeyStore.DEFAULT_MAX_RETENTION.toDays()
                    + " days with --store postgres");
        return 2;
      }
      if ((long) sessions * window > MAX_PG_LANES) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: --store postgres runs a thread per lane: at most "
                    + MAX_PG_LANES
                    + " lanes (--sessions x --window), got "
                    + (long) sessions * window);
        return 2;
      }
      List<String> settings = new ArrayList<>();
      boolean namesConnections = false;
      for (String part : pgSettings.split(",")) {
        String setting = part.strip();
        if (setting.isEmpty()) {
          continue;
        }
        int eq = setting.indexOf('=');
        if (eq < 1 || eq == setting.length() - 1) {
          spec.commandLine()
              .getErr()
              .println("idem: --pg-settings: expected name=value, got '" + setting + "'");
          return 2;
        }
        String name = setting.substring(0, eq).strip().toLowerCase(Locale.ROOT);
        if (DURABILITY_SETTINGS.contains(name)) {
          spec.commandLine()
              .getErr()
              .println(
                  "idem: --pg-settings: the bench keeps "
                      + String.join(", ", DURABILITY_SETTINGS)
                      + " on; got '"
                      + setting
                      + "'");
          return 2;
        }
        if (name.equals("max_connections")) {
          namesConnections = true;
        }
        settings.add(setting);
      }
      if (!namesConnections && pgPool + PG_SPARE_CONNECTIONS > PostgresServer.MAX_CONNECTIONS) {
        settings.add("max_connections=" + (pgPool + PG_SPARE_CONNECTIONS)); // the pool's, and ours
      }
      return go ? onPostgres(settings) : 0;
    }
    if (store != Store.idem) {
      if (workload != Workload.keys || target != Target.idem || local != 0) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: --store " + store + " runs the keys workload on its own redis-server only");
        return 2;
      }
      RedisServer.Aof aof;
      try {
        aof = RedisServer.Aof.named(appendfsync);
      } catch (IllegalArgumentException e) {
        spec.commandLine().getErr().println("idem: --appendfsync: " + e.getMessage());
        return 2;
      }
      return go ? onRedis(aof) : 0;
    }
    if (target == Target.etcd) {
      if (local != 0 || workload != Workload.put) {
        spec.commandLine()
            .getErr()
            .println("idem: --target etcd runs the put workload against --servers only");
        return 2;
      }
      if (!go) {
        return 0;
      }
      try (EtcdTarget etcd = EtcdTarget.connect(servers, valueSize)) {
        etcd.probe(); // fails fast, in one line, if nobody answers
        return measure(etcd);
      }
    }
    if (!go) {
      return 0;
    }
    if (local == 0) {
      return run(servers, clientTls);
    }
    Path dir = Files.createTempDirectory("idem-bench");
    // One anonymous principal runs the whole load: bootstrap the cluster with quotas to match (the
    // keys workload holds about throughput x retention key records).
    try (LocalCluster cluster =
        LocalCluster.start(
            local,
            dir,
            b ->
                b.bootstrapQuotas(
                    io.idem.proto.Quotas.newBuilder()
                        .setKeyRecords(2_000_000)
                        .setKeyBytes(1L << 30)
                        .build()))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      return run(String.join(",", cluster.clientAddresses()), null);
    } finally {
      try (Stream<Path> files = Files.walk(dir)) {
        for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      }
    }
  }

  /**
   * Runs every store of {@link #stores} {@link #rounds} times, alternating (store A, B, A, B...),
   * each run as it would run alone, then prints each round and each store's throughput summed over
   * the rounds, as a ratio to the last store listed; the last line is JSON. Stops at the first run
   * that fails, with its exit code.
   */
  private int sideBySide(ClientTls clientTls) throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    Map<Store, List<RunResult>> results = new LinkedHashMap<>();
    stores.forEach(st -> results.put(st, new ArrayList<>()));
    for (int r = 1; r <= rounds; r++) {
      for (Store st : stores) {
        out.printf("%n== round %d of %d: --store %s%n", r, rounds, st);
        out.flush();
        lastResult = null;
        int code = one(st, clientTls, true);
        if (code != 0 || lastResult == null) {
          spec.commandLine()
              .getErr()
              .println(
                  "idem: --store " + st + " failed in round " + r + "; no side-by-side summary");
          return code != 0 ? code : 1;
        }
        results.get(st).add(lastResult);
      }
    }
    Store base = stores.get(stores.size() - 1);
    double baseSum = results.get(base).stream().mapToDouble(RunResult::opsPerSecond).sum();
    if (baseSum <= 0) {
      spec.commandLine()
          .getErr()
          .println("idem: --store " + base + " completed no operation: no ratio to it");
      return 1;
    }
    out.println();
    out.printf(
        Locale.ROOT,
        "side by side, %d round(s), %d sessions x window %d: keyed operations/s (p50 / p99 / p99.9"
            + " ms)%n",
        rounds,
        sessions,
        window);
    for (int r = 0; r < rounds; r++) {
      StringBuilder line = new StringBuilder("round " + (r + 1) + ":");
      double baseOps = results.get(base).get(r).opsPerSecond();
      for (Store st : stores) {
        RunResult x = results.get(st).get(r);
        line.append(
            String.format(
                Locale.ROOT,
                "  %s %,.0f (%.1f / %.1f / %.1f)",
                st,
                x.opsPerSecond(),
                x.p50(),
                x.p99(),
                x.p999()));
        if (st != base) {
          line.append(
              baseOps > 0
                  ? String.format(Locale.ROOT, " = %.2fx %s", x.opsPerSecond() / baseOps, base)
                  : " (no ratio: " + base + " completed nothing this round)");
        }
      }
      out.println(line);
    }
    StringBuilder json =
        new StringBuilder(
            String.format(
                Locale.ROOT,
                "{\"side_by_side\":{\"workload\":\"keys\",\"rounds\":%d,\"sessions\":%d,"
                    + "\"window\":%d,\"baseline\":\"%s\",\"stores\":[",
                rounds,
                sessions,
                window,
                base));
    String sep = "";
    for (Store st : stores) {
      double sum = results.get(st).stream().mapToDouble(RunResult::opsPerSecond).sum();
      out.printf(
          Locale.ROOT,
          "summed over the rounds: %s %,.0f keyed operations/s = %.2fx %s%n",
          st,
          sum,
          sum / baseSum,
          base);
      StringBuilder each = new StringBuilder();
      for (RunResult x : results.get(st)) {
        each.append(each.length() == 0 ? "" : ",")
            .append(String.format(Locale.ROOT, "%.1f", x.opsPerSecond()));
      }
      json.append(sep)
          .append(
              String.format(
                  Locale.ROOT,
                  "{\"store\":\"%s\",\"ops_per_s\":[%s],\"summed\":%.1f,\"ratio\":%.3f}",
                  st,
                  each,
                  sum,
                  sum / baseSum));
      sep = ",";
    }
    out.println(json.append("]}}"));
    return 0;
  }

  /**
   * Starts a private redis-server in a temporary directory, runs the keys workload on it through
   * the Redis store or seed 001, stops it (by PID) and deletes the directory.
   */
  private int onRedis(RedisServer.Aof aof) throws Exception {
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
      spec.commandLine()
          .getOut()
          .printf(
              "%s on a private %s (pid %d, %s), appendfsync %s, data in %s%n",
              store,
              redisServer,
              redis.pid(),
              redis.uri(),
              aof.name().toLowerCase(Locale.ROOT),
              dir);
      try (BenchTarget t =
          store == Store.redis
              ? new RedisStoreTarget(
                  client, sessions, run, KEY_IN_PROGRESS, keyRetention, valueSize, ledger)
              : new Seed001Target(client, sessions, run, KEY_IN_PROGRESS.toMillis(), ledger)) {
        return measure(t);
      } finally {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    } finally {
      try (Stream<Path> files = Files.walk(dir)) {
        for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      }
    }
  }

  /**
   * Starts a private PostgreSQL server (fsync on) in a temporary directory, runs the keys workload
   * on it through the PostgreSQL key store, checks what the database holds against what was
   * acknowledged, and stops the server (by PID) and deletes its directory.
   */
  private int onPostgres(List<String> settings) throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    PostgresServer started;
    try {
      started = PostgresServer.create(PostgresServer.Durability.DURABLE, settings);
    } catch (RuntimeException e) {
      // initdb or the server failed (binaries missing, a bad setting): the log's last lines
      spec.commandLine()
          .getErr()
          .println("idem: cannot start PostgreSQL: " + e.getMessage().strip().replace('\n', ' '));
      return 1;
    }
    try (PostgresServer pg = started;
        HikariDataSource pool = pg.pool(pgPool, 30_000)) {
      out.printf(
          "postgres (%s mode) on a private %s (pid %d), pool %d, %d lanes%n",
          pgMode, pg.describe(), pg.pid(), pgPool, sessions * window);
      PostgresStoreTarget t;
      try {
        t =
            new PostgresStoreTarget(
                pool, pgMode, sessions * window, run, KEY_IN_PROGRESS, keyRetention, valueSize);
      } catch (IllegalArgumentException e) {
        spec.commandLine().getErr().println("idem: " + e.getMessage());
        return 2;
      }
      try (t) {
        int code = measure(t);
        if (lastInFlight > 0) {
          spec.commandLine()
              .getErr()
              .println(
                  "idem: the database is not checked: "
                      + lastInFlight
                      + " operations were still running 30 s after the end");
          return 1;
        }
        String wrong = t.check(lastErrors);
        if (wrong != null) {
          spec.commandLine().getErr().println("idem: the database disagrees: " + wrong);
          return 1;
        }
        out.println("checked: " + t.counts());
        return code;
      }
    }
  }

  private int run(String addresses, ClientTls clientTls) throws Exception {
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
        for (int i = 1; i < sessions; i++) {
          clients.add(
              IdemClient.builder().servers(addresses).transport(transport).window(window).build());
        }
        return measure(new IdemTarget(clients));
      } finally {
        for (IdemClient c : clients) {
          c.close();
        }
      }
    }
  }

  /** Idem sessions, one client each, on one shared transport. */
  private final class IdemTarget implements BenchTarget {
    private final List<IdemClient> clients;
    private final byte[] value = new byte[valueSize];

    IdemTarget(List<IdemClient> clients) {
      this.clients = clients;
    }

    @Override
    public String name() {
      return "idem";
    }

    @Override
    public CompletableFuture<?> op(int session, long n) {
      return BenchCommand.this.op(clients.get(session), session, n, value);
    }

    @Override
    public long retries() {
      return clients.stream().mapToLong(IdemClient::retries).sum();
    }

    @Override
    public long duplicates() {
      return clients.stream().mapToLong(IdemClient::duplicatesSeen).sum();
    }

    @Override
    public void close() {
      // the clients are closed by run()
    }
  }

  /**
   * Runs {@code window} closed loops per session: each issues an operation and, when it completes,
   * the next, until the time is up. Operations started during the warm-up are not counted.
   */
  private int measure(BenchTarget target) throws InterruptedException {
    Recorder recorder = new Recorder(3);
    AtomicLong done = new AtomicLong();
    AtomicLong errors = new AtomicLong();
    AtomicReference<Throwable> firstError = new AtomicReference<>();
    AtomicLong inFlight = new AtomicLong();
    long warmupEnd = System.nanoTime() + warmup.toNanos();
    long end = warmupEnd + duration.toNanos();
    BenchLanes lanes =
        new BenchLanes(target, end, warmupEnd, recorder, done, errors, firstError, inFlight);
    for (int i = 0; i < sessions; i++) {
      AtomicLong counter = new AtomicLong();
      for (int lane = 0; lane < window; lane++) {
        lanes.issue(i, counter);
      }
    }
    long nextTick = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    long lastDone = 0;
    Histogram h = new Histogram(3);
    Histogram second = null;
    try (BenchTimeline line = BenchTimeline.open(timeline, target.name() + " " + workloadName())) {
      while (System.nanoTime() < end) {
        TimeUnit.NANOSECONDS.sleep(Math.max(0, Math.min(end, nextTick) - System.nanoTime()));
        long now = System.nanoTime();
        if (now >= nextTick) {
          long d = done.get();
          progress(now, warmupEnd, d - lastDone);
          lastDone = d;
          nextTick += TimeUnit.SECONDS.toNanos(1);
          second = recorder.getIntervalHistogram(second);
          h.add(second);
          if (now > warmupEnd) {
            line.write(second);
          }
        }
      }
      long drainDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (inFlight.get() > 0 && System.nanoTime() < drainDeadline) {
        Thread.sleep(10); // let what is in flight finish before the clients close
      }
      second = recorder.getIntervalHistogram(second);
      h.add(second);
      if (second.getTotalCount() > 0) {
        line.write(second);
      }
    }
    long ops = done.get();
    long retries = target.retries();
    long duplicates = target.duplicates();
    double seconds = duration.toNanos() / 1e9;
    double throughput = ops / seconds;
    PrintWriter out = spec.commandLine().getOut();
    out.println();
    out.printf(
        Locale.ROOT,
        "%s %s, %d sessions x window %d, %d-byte values, %.1f s after %.1f s warm-up: %.0f %s/s%n",
        target.name(),
        workloadName(),
        sessions,
        window,
        valueSize,
        seconds,
        warmup.toNanos() / 1e9,
        throughput,
        unit());
    out.printf(
        Locale.ROOT,
        "latency ms: p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f   retries %d  duplicates suppressed %d  errors %d%n",
        ms(h, 50),
        ms(h, 99),
        ms(h, 99.9),
        h.getMaxValue() / 1000.0,
        retries,
        duplicates,
        errors.get());
    out.printf(
        Locale.ROOT,
        "{\"target\":\"%s\",\"workload\":\"%s\",\"sessions\":%d,\"window\":%d,\"value_size\":%d,"
            + "\"seconds\":%.2f,\"ops\":%d,\"ops_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
            + "\"p999_ms\":%.3f,\"retries\":%d,\"duplicates\":%d,\"errors\":%d}%n",
        target.name(),
        workloadName(),
        sessions,
        window,
        valueSize,
        seconds,
        ops,
        throughput,
        ms(h, 50),
        ms(h, 99),
        ms(h, 99.9),
        retries,
        duplicates,
        errors.get());
    if (firstError.get() != null) {
      spec.commandLine().getErr().println("idem: first error: " + Errors.oneLine(firstError.get()));
    }
    lastErrors = errors.get();
    lastInFlight = inFlight.get();
    lastResult = new RunResult(throughput, ms(h, 50), ms(h, 99), ms(h, 99.9));
    return errors.get() == 0 ? 0 : 1;
  }

  private CompletableFuture<?> op(IdemClient c, int session, long n, byte[] value) {
    Workload w = workload == Workload.mixed ? Workload.values()[(int) (n % 3)] : workload;
    return switch (w) {
      case put -> c.putAsync("bench/" + session + "/" + (n % 1000), value, null);
      case incr -> c.incrementAsync("bench/counter/" + session, 1);
      case append -> c.appendAsync("bench/list/" + (session % 16), value);
      case keys -> keyed(c, session, n, value);
      case mixed -> throw new IllegalStateException("mixed is resolved above");
    };
  }

  /**
   * Acquires a key no one used before and completes it: one keyed operation. Any answer but
   * acquired, then settled, fails it, so that it counts as an error.
   */
  private CompletableFuture<?> keyed(IdemClient c, int session, long n, byte[] response) {
    String key = run + "-" + session + "-" + n;
    return c.acquireKeyAsync(KEY_SCOPE, key, new byte[0], KEY_IN_PROGRESS, keyRetention)
        .thenCompose(
            a ->
                a instanceof KeyAcquisition.Acquired got
                    ? c.completeKeyAsync(
                        KEY_SCOPE,
                        key,
                        got.token(),
                        response,
                        ledger
                            ? Write.append(
                                "bench/ledger/" + session, key.getBytes(StandardCharsets.UTF_8))
                            : null)
                    : CompletableFuture.failedFuture(
                        new IllegalStateException("acquire of a new key answered " + a)))
        .thenApply(
            s -> {
              if (!(s instanceof KeySettlement.Settled)) {
                throw new IllegalStateException("complete of an acquired key answered " + s);
              }
              return s;
            });
  }

  /** The workload's name in the report: {@code keys+ledger} with {@code --ledger}. */
  private String workloadName() {
    return workload + (ledger ? "+ledger" : "");
  }

  /** What one operation of the workload is, for the report. */
  private String unit() {
    return workload == Workload.keys ? "keyed operations" : "writes";
  }

  /** {@code percentile} of {@code h} (microseconds) in milliseconds; 0 for an empty one. */
  static double ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(percentile) / 1000.0;
  }

  private void progress(long now, long warmupEnd, long lastSecond) {
    int width = 30;
    double fraction = Math.max(0, Math.min(1, (now - warmupEnd) / (double) duration.toNanos()));
    int filled = (int) (fraction * width);
    PrintWriter out = spec.commandLine().getOut();
    out.printf(
        Locale.ROOT,
        "\r[%s%s] %3.0f%%  %,d %s/s %s",
        "#".repeat(filled),
        " ".repeat(width - filled),
        fraction * 100,
        lastSecond,
        unit(),
        now < warmupEnd ? "(warm-up) " : "          ");
    out.flush();
  }
}
