package io.idem.lab;

import io.idem.cli.DurationConverter;
import io.idem.cli.TlsOptions;
import io.idem.client.ClientTls;
import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.testkit.stores.RedisServer;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.ThreadLocalRandom;
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
 *
 * <p>This command holds the options, checks them, and runs one store or several side by side:
 * {@link BenchStores} provisions each run's target and {@link BenchRun} measures it, both reading
 * the {@link BenchSettings} fixed from the options.
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
    keys,
    get
  }

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
    etcd,
    zookeeper
  }

  @Option(
      names = "--target",
      defaultValue = "idem",
      description =
          "idem; etcd: the same loops as plain puts through jetcd against the etcd cluster at"
              + " --servers (bench/compare-etcd.sh); or zookeeper: the same puts as znode writes"
              + " through the ZooKeeper client against the ensemble at --servers"
              + " (bench/compare-peers.sh). Default: ${DEFAULT-VALUE}.")
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
          "put, incr, append, mixed, keys, or get. keys: each operation acquires a new"
              + " idempotency key and completes it with a --value-size response (two writes, one"
              + " latency). get: linearizable reads of "
              + BenchTarget.READ_KEYS
              + " keys written before the run (on etcd a plain get, on ZooKeeper a sync then a"
              + " read). Default: ${DEFAULT-VALUE}.")
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
      defaultValue = BenchStores.PG_SETTINGS,
      description =
          "With --store postgres: the private server's settings beyond PostgreSQL's defaults, as"
              + " name=value,... (fsync, synchronous_commit and full_page_writes stay on; '' for"
              + " none). Its binaries:"
              + " $IDEM_PG_BIN, else pg_config --bindir, else the newest /usr/lib/postgresql/*/bin."
              + " Default: ${DEFAULT-VALUE}.")
  String pgSettings;

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

  /** What the last {@link #measure} reported, for {@link #sideBySide}. */
  private BenchRun.Result lastResult;

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

  @Option(
      names = "--rate",
      defaultValue = "0",
      paramLabel = "R",
      description =
          "Open loop: send R operations a second (spread over the sessions) whatever the system's"
              + " answers, and time each from when it was due, so that a stall shows in every"
              + " operation due during it. Flags a run that completed less than 97% of R. 0: the"
              + " closed loops of --sessions x --window. Default: ${DEFAULT-VALUE}.")
  double rate;

  @Option(
      names = "--max-in-flight",
      defaultValue = "100000",
      description =
          "With --rate: most operations outstanding at once; past it the sender waits, and the"
              + " wait counts in their latency (1-1000000). Default: ${DEFAULT-VALUE}.")
  int maxInFlight;

  @Option(
      names = "--cpu-pids",
      split = ",",
      paramLabel = "PID",
      description =
          "Server processes whose CPU time (user + system, /proc) over the measured window is"
              + " reported per operation, beside the bench's own.")
  List<Long> cpuPids;

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
    if (rate < 0 || rate > 10_000_000 || maxInFlight < 1 || maxInFlight > 1_000_000) {
      spec.commandLine()
          .getErr()
          .println(
              "idem: out of range: --rate 0-10000000 (0: closed loops), --max-in-flight 1-1000000");
      return 2;
    }
    if (cpuPids != null) {
      for (long pid : cpuPids) {
        if (CpuMeter.ticks(pid) < 0) {
          spec.commandLine()
              .getErr()
              .println(
                  "idem: --cpu-pids: no process " + pid + " to measure (/proc/" + pid + "/stat)");
          return 2;
        }
      }
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
      if ((long) sessions * window > BenchStores.MAX_PG_LANES) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: --store postgres runs a thread per lane: at most "
                    + BenchStores.MAX_PG_LANES
                    + " lanes (--sessions x --window), got "
                    + (long) sessions * window);
        return 2;
      }
      List<String> settings;
      try {
        settings = BenchStores.postgresSettings(pgSettings, pgPool);
      } catch (IllegalArgumentException e) {
        spec.commandLine().getErr().println("idem: " + e.getMessage());
        return 2;
      }
      return go ? stores().onPostgres(settings, pgMode, pgPool) : 0;
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
      return go ? stores().onRedis(store, redisServer, aof) : 0;
    }
    if (target != Target.idem) {
      if (local != 0 || (workload != Workload.put && workload != Workload.get)) {
        spec.commandLine()
            .getErr()
            .println(
                "idem: --target "
                    + target
                    + " runs the put or get workload against --servers only");
        return 2;
      }
      if (!go) {
        return 0;
      }
      return target == Target.etcd
          ? stores().onEtcd(servers)
          : stores().onZooKeeper(servers, probeTimeout);
    }
    if (!go) {
      return 0;
    }
    return local == 0
        ? stores().onIdem(servers, clientTls, probeTimeout)
        : stores().onLocal(local, probeTimeout);
  }

  /** The provisioning of this run's target, measured by {@link #measure}. */
  private BenchStores stores() {
    return new BenchStores(
        settings(), run, spec.commandLine().getOut(), spec.commandLine().getErr(), this::measure);
  }

  /** The options the measurement and the targets read, fixed for one run. */
  private BenchSettings settings() {
    return new BenchSettings(
        sessions,
        window,
        workload,
        ledger,
        valueSize,
        keyRetention,
        warmup,
        duration,
        timeline,
        rate,
        maxInFlight,
        cpuPids == null ? List.of() : cpuPids);
  }

  /** Measures one run on {@code target}, and keeps its result for {@link #sideBySide}. */
  private BenchRun.Result measure(BenchTarget target) throws InterruptedException {
    lastResult =
        new BenchRun(settings(), spec.commandLine().getOut(), spec.commandLine().getErr())
            .measure(target);
    return lastResult;
  }

  /**
   * Runs every store of {@link #stores} {@link #rounds} times, alternating (store A, B, A, B...),
   * each run as it would run alone, then prints each round and each store's throughput summed over
   * the rounds, as a ratio to the last store listed; the last line is JSON. Stops at the first run
   * that fails, with its exit code.
   */
  private int sideBySide(ClientTls clientTls) throws Exception {
    PrintWriter out = spec.commandLine().getOut();
    Map<Store, List<BenchRun.Result>> results = new LinkedHashMap<>();
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
    double baseSum = results.get(base).stream().mapToDouble(BenchRun.Result::opsPerSecond).sum();
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
        BenchRun.Result x = results.get(st).get(r);
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
      double sum = results.get(st).stream().mapToDouble(BenchRun.Result::opsPerSecond).sum();
      out.printf(
          Locale.ROOT,
          "summed over the rounds: %s %,.0f keyed operations/s = %.2fx %s%n",
          st,
          sum,
          sum / baseSum,
          base);
      StringBuilder each = new StringBuilder();
      for (BenchRun.Result x : results.get(st)) {
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
}
