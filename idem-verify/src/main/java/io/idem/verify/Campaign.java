package io.idem.verify;

import io.idem.client.DuplicateLeaseException;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.KeyValue;
import io.idem.client.LeaseNotFoundException;
import io.idem.client.NotSentException;
import io.idem.client.OutcomeUnknownException;
import io.idem.proto.StatusReply;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A fault campaign: real server processes behind fault proxies; clients appending unique elements
 * to lists and incrementing counters (pipelined), reading, writing and compare-and-setting
 * registers, taking turns at leases, and appending from client processes of their own; while a
 * seeded schedule kills (SIGKILL), pauses (SIGSTOP) and wipes nodes, loses responses, resets
 * connections, delays traffic, kills client processes, and partitions the servers ({@link
 * PeerFaults}). Then final reads, the checkers, and the replicas' digests. Every operation is
 * recorded in a JSON lines history next to the servers' logs.
 */
public final class Campaign {

  /**
   * What to run.
   *
   * @param seed the fault schedule's and the workload's seed
   * @param nodes servers (3 or 5)
   * @param duration how long the clients run
   * @param appendClients in-process clients appending to lists
   * @param counterClients in-process clients incrementing counters
   * @param registerClients clients reading, writing and compare-and-setting registers
   * @param leaseClients clients taking turns at two lease names
   * @param clientProcesses appending clients in processes of their own, killed and restarted
   * @param window calls each appending or incrementing client keeps in flight
   * @param faultEvery mean time between faults
   * @param atLeastOnce the negative control: a call that times out is sent again as a new call
   *     (plain at-least-once), with a short timeout so that it happens
   */
  public record Settings(
      long seed,
      int nodes,
      Duration duration,
      int appendClients,
      int counterClients,
      int registerClients,
      int leaseClients,
      int clientProcesses,
      int window,
      Duration faultEvery,
      boolean atLeastOnce) {

    /** Validates the settings. */
    public Settings {
      if (nodes != 3 && nodes != 5) {
        throw new IllegalArgumentException("nodes must be 3 or 5, got " + nodes);
      }
      if (window < 1 || (atLeastOnce && window != 1)) {
        throw new IllegalArgumentException(
            "window must be positive (1 for the negative control), got " + window);
      }
      if (duration.isNegative() || duration.isZero() || faultEvery.toMillis() < 1) {
        throw new IllegalArgumentException("duration and faultEvery must be positive");
      }
    }

    /**
     * The ci profile (part of {@code ./mvnw verify} as CampaignTest, and {@code idem verify}): 3
     * nodes, 4 appending and 2 incrementing clients (4 calls in flight each), 2 register clients, 2
     * lease clients and one client process, 90 s with a fault every 2 s on average (between the end
     * of one and the start of the next), every kind in each round (15 kinds since the partitions
     * and the node replacement: a round takes 50-60 s on a quiet machine, so 90 s leave room for
     * one whole round on a busy one). The negative control: 4 + 2 clients one call at a time, 30 s,
     * node faults on the leader and lost responses every 3 s.
     */
    public static Settings ci(long seed, boolean atLeastOnce) {
      return atLeastOnce
          ? new Settings(
              seed, 3, Duration.ofSeconds(30), 4, 2, 0, 0, 0, 1, Duration.ofSeconds(3), true)
          : new Settings(
              seed, 3, Duration.ofSeconds(90), 4, 2, 2, 2, 1, 4, Duration.ofSeconds(2), false);
    }

    /**
     * The long profile: 3 nodes, 8 + 4 pipelined clients (8 in flight each), 4 register clients, 3
     * lease clients, 2 client processes, 30 minutes, a fault every 0.8 s on average (between the
     * end of one and the start of the next: about one every 3.4 s).
     */
    public static Settings longRun(long seed, boolean atLeastOnce) {
      return atLeastOnce
          ? ci(seed, true).lasting(Duration.ofMinutes(30))
          : new Settings(
              seed, 3, Duration.ofMinutes(30), 8, 4, 4, 3, 2, 8, Duration.ofMillis(800), false);
    }

    /** The same settings, running for {@code d}. */
    public Settings lasting(Duration d) {
      return with(nodes, d);
    }

    /**
     * The same settings on {@code n} nodes.
     *
     * @throws IllegalArgumentException unless {@code n} is 3 or 5
     */
    public Settings on(int n) {
      return with(n, duration);
    }

    private Settings with(int n, Duration d) {
      return new Settings(
          seed,
          n,
          d,
          appendClients,
          counterClients,
          registerClients,
          leaseClients,
          clientProcesses,
          window,
          faultEvery,
          atLeastOnce);
    }
  }

  /** What happened. */
  public record Report(
      long seed,
      Map<Op.Fn, Long> opsByKind,
      Map<Op.Outcome, Long> opsByOutcome,
      Map<String, Long> faults,
      long retries,
      long duplicatesSuppressed,
      List<Violation> violations,
      List<String> undecidedRegisters,
      Path history) {}

  /** The kinds of fault the schedule injects. */
  enum Fault {
    KILL_LEADER,
    KILL_FOLLOWER,
    PAUSE_LEADER,
    PAUSE_FOLLOWER,
    LOSE_RESPONSES,
    RESET_CONNECTIONS,
    DELAY,
    KILL_CLIENT_PROCESS,
    WIPE_LEADER,
    /**
     * kill -9 a node, wipe it, add it back under a new id, remove the old id; then restart the
     * members one by one onto the peer links ({@link ProcessCluster#relink}).
     */
    REPLACE_NODE,
    // Between servers (PeerFaults, on the cluster's PeerNetwork):
    ISOLATE_LEADER,
    SPLIT_MAJORITY,
    BRIDGE,
    ONE_WAY,
    HALF_OPEN_PEER_LINK
  }

  static final int LISTS = 8;
  private static final int COUNTERS = 2;
  private static final int REGISTERS = 2;
  private static final int LEASES = 2;
  private static final long LEASE_TTL_MS = 1_500;

  private final Path dir;
  private final Settings settings;
  private final List<Op> history = Collections.synchronizedList(new ArrayList<>());
  private final AtomicLong ids = new AtomicLong();
  private final Map<String, Long> faults = new ConcurrentHashMap<>();
  private final AtomicLong retries = new AtomicLong();
  private final long t0 = System.nanoTime();
  private final ExecutorService resender = Executors.newSingleThreadExecutor();
  private ProcessCluster cluster;
  private ClusterWatch watch;
  private final List<Process> workers = new ArrayList<>();
  private long end;

  private Campaign(Path dir, Settings settings) {
    this.dir = dir;
    this.settings = settings;
  }

  /** Runs a campaign in {@code dir} (servers' data and logs, and the history file). */
  public static Report run(Path dir, Settings settings) throws Exception {
    Campaign c = new Campaign(dir, settings);
    try {
      return c.run();
    } finally {
      c.resender.shutdownNow();
    }
  }

  private Report run() throws Exception {
    try (ProcessCluster cl = new ProcessCluster(dir, settings.nodes())) {
      this.cluster = cl;
      this.watch = new ClusterWatch(cl, settings.window());
      cl.startAll();
      // Three JVMs starting at once took 50-55 s to serve on the shared machine at a load average
      // of 25-30 (server logs), past a minute's wait for a leader.
      watch.awaitLeader(Duration.ofSeconds(180));
      end = System.nanoTime() + settings.duration().toNanos();
      List<Thread> threads = new ArrayList<>();
      int c = 0;
      for (int i = 0; i < settings.appendClients(); i++, c++) {
        int id = c;
        threads.add(thread("append-" + id, () -> pipelined(id, true)));
      }
      for (int i = 0; i < settings.counterClients(); i++, c++) {
        int id = c;
        threads.add(thread("incr-" + id, () -> pipelined(id, false)));
      }
      for (int i = 0; i < settings.registerClients(); i++, c++) {
        int id = c;
        threads.add(thread("register-" + id, () -> registers(id)));
      }
      for (int i = 0; i < settings.leaseClients(); i++, c++) {
        int id = c;
        threads.add(thread("lease-" + id, () -> leases(id)));
      }
      for (int w = 0; w < settings.clientProcesses(); w++) {
        workers.add(startWorker(w));
      }
      faults();
      for (Thread t : threads) {
        t.join();
      }
      if (!crashed.isEmpty()) {
        Map.Entry<String, Throwable> first = crashed.entrySet().iterator().next();
        throw new IllegalStateException(
            crashed.size()
                + " workload thread(s) died, the run cannot be judged; "
                + first.getKey()
                + ": "
                + first.getValue(),
            first.getValue());
      }
      cl.network().healAll();
      for (int i = 0; i < cl.size(); i++) {
        cl.resume(i);
        cl.proxy(i).passResponses();
        cl.proxy(i).delay(Duration.ZERO);
        if (!cl.isRunning(i)) {
          cl.start(i);
        }
      }
      List<Op> ops;
      synchronized (history) {
        ops = new ArrayList<>(history);
      }
      ops.addAll(awaitWorkers());
      watch.awaitLeader(Duration.ofSeconds(60));
      Map<String, List<Long>> lists = new HashMap<>();
      Map<String, Long> counters = new HashMap<>();
      try (IdemClient reader = watch.client(Duration.ofSeconds(60))) {
        for (int k = 0; k < LISTS; k++) {
          String key = "list/" + k;
          List<Long> elements = new ArrayList<>();
          reader
              .get(key)
              .map(KeyValue::elements)
              .ifPresent(
                  es ->
                      es.forEach(
                          b ->
                              elements.add(Long.parseLong(new String(b, StandardCharsets.UTF_8)))));
          lists.put(key, elements);
        }
        for (int k = 0; k < COUNTERS; k++) {
          String key = "counter/" + k;
          counters.put(
              key, reader.get(key).map(kv -> Long.parseLong(kv.valueAsString())).orElse(0L));
        }
      }
      Path file = dir.resolve("history.jsonl");
      History.write(file, ops);
      History.FinalState end = new History.FinalState(lists, counters);
      History.writeFinalState(dir.resolve("final-state.json"), end);
      List<String> undecided = new ArrayList<>();
      List<Violation> violations = Checkers.judge(ops, end, undecided);
      long duplicates = watch.convergence(violations);
      Map<Op.Fn, Long> byKind = new EnumMap<>(Op.Fn.class);
      Map<Op.Outcome, Long> byOutcome = new EnumMap<>(Op.Outcome.class);
      for (Op op : ops) {
        byKind.merge(op.f(), 1L, Long::sum);
        byOutcome.merge(op.outcome(), 1L, Long::sum);
      }
      return new Report(
          settings.seed(),
          byKind,
          byOutcome,
          new TreeMap<>(faults),
          retries.get(),
          duplicates,
          violations,
          undecided,
          file);
    } finally {
      for (Process w : workers) {
        w.destroyForcibly();
      }
    }
  }

  /**
   * Judges a recorded run again, offline, from its directory ({@code history.jsonl} and {@code
   * final-state.json}): every checker but the replicas' convergence, which needed the live nodes.
   * Registers the linearizability search gave up on go to {@code undecided}.
   */
  public static List<Violation> check(Path dir, List<String> undecided) throws IOException {
    return Checkers.check(dir, undecided);
  }

  /** Workload threads that died of an exception: the run cannot be judged. */
  private final Map<String, Throwable> crashed = new ConcurrentHashMap<>();

  private Thread thread(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.setUncaughtExceptionHandler((th, e) -> crashed.put(th.getName(), e));
    t.start();
    return t;
  }

  private IdemClient client() {
    return watch.client(settings.atLeastOnce() ? Duration.ofMillis(300) : Duration.ofSeconds(20));
  }

  private void retire(IdemClient c) {
    retries.addAndGet(c.retries());
    c.close();
  }

  /**
   * One workload client's current {@link IdemClient}. When its session is lost (an unknown outcome
   * that is not a timeout), it is replaced by a new client, a new session under a new process name
   * ({@code c3}, then {@code c3.2}, ...), as a restarted application would be.
   */
  private final class Life implements AutoCloseable {
    private final int id;
    private IdemClient client = Campaign.this.client();
    private int n = 1;

    Life(int id) {
      this.id = id;
    }

    IdemClient current() {
      return client;
    }

    String process() {
      return "c" + id + (n == 1 ? "" : "." + n);
    }

    /** After a failure: a timeout keeps the session, anything else starts a new life. */
    void after(Throwable failure) {
      if (!deadlinePassed(failure)) {
        renew();
      }
    }

    void renew() {
      retire(client);
      client = Campaign.this.client();
      n++;
    }

    @Override
    public void close() {
      retire(client);
    }
  }

  private static Throwable unwrap(Throwable e) {
    return e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
  }

  /**
   * An appending or incrementing client with {@code window} calls in flight. An unknown outcome
   * that is not a timeout (the session was lost, or the client fenced or closed) retires the
   * client: the next calls go to a new client, a new session, under a new process name.
   */
  private void pipelined(int id, boolean appender) {
    Random r = new Random(settings.seed() * 31 + id);
    Semaphore slots = new Semaphore(settings.window());
    AtomicBoolean broken = new AtomicBoolean();
    Life life = new Life(id);
    long seq = 0;
    long element = (long) id * 1_000_000_000L;
    try {
      while (System.nanoTime() < end) {
        if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
          continue;
        }
        if (broken.get()) {
          slots.release();
          drain(slots);
          life.renew();
          broken.set(false);
          continue;
        }
        String process = life.process();
        String key = appender ? "list/" + r.nextInt(LISTS) : "counter/" + r.nextInt(COUNTERS);
        long value = appender ? ++element : 1;
        long s = ++seq;
        long start = now();
        issue(life.current(), appender, key, value)
            .whenComplete(
                (result, e) -> {
                  Throwable cause = e == null ? null : unwrap(e);
                  Op.Outcome o = cause == null ? Op.Outcome.OK : Op.Outcome.INFO;
                  if (cause != null && !deadlinePassed(cause)) {
                    broken.set(true);
                  }
                  history.add(
                      new Op(
                          ids.incrementAndGet(),
                          process,
                          appender ? Op.Fn.APPEND : Op.Fn.INCR,
                          key,
                          value,
                          0,
                          s,
                          start,
                          o == Op.Outcome.INFO ? Long.MAX_VALUE : now(),
                          o,
                          appender ? null : result));
                  slots.release();
                });
      }
      drain(slots);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } finally {
      life.close();
    }
  }

  private void drain(Semaphore slots) throws InterruptedException {
    if (slots.tryAcquire(settings.window(), 90, TimeUnit.SECONDS)) {
      slots.release(settings.window());
    }
  }

  /**
   * One call. In the negative control a timed-out call is sent again as a new call with a new
   * number, until one is answered or the campaign ends: plain at-least-once retry logic.
   */
  private CompletableFuture<Long> issue(
      IdemClient client, boolean appender, String key, long value) {
    CompletableFuture<Long> call =
        appender
            ? client.appendAsync(key, Long.toString(value).getBytes(StandardCharsets.UTF_8))
            : client.incrementAsync(key, value);
    if (!settings.atLeastOnce()) {
      return call;
    }
    return call.handle(
            (v, e) -> {
              if (e != null && deadlinePassed(unwrap(e)) && System.nanoTime() < end) {
                // Off the client's I/O thread: a new call may wait for a window slot.
                return CompletableFuture.supplyAsync(() -> 0, resender)
                    .thenCompose(x -> issue(client, appender, key, value));
              }
              return e == null
                  ? CompletableFuture.completedFuture(v)
                  : CompletableFuture.<Long>failedFuture(unwrap(e));
            })
        .thenCompose(f -> f);
  }

  /**
   * Whether {@code failure} is a call's deadline passing (sent or not): the session goes on, and a
   * call that was sent is still resent by it.
   */
  static boolean deadlinePassed(Throwable failure) {
    return failure instanceof OutcomeUnknownException
        || (failure instanceof NotSentException n
            && n.reason() == NotSentException.Reason.DEADLINE);
  }

  /**
   * A register client's loop: linearizable reads, writes of unique values, and compare-and-sets at
   * the version its last read saw, on a few keys, one call at a time.
   */
  private void registers(int id) {
    Random r = new Random(settings.seed() * 31 + id);
    long unique = (long) id * 1_000_000_000L;
    Map<String, Long> lastVersion = new HashMap<>();
    try (Life life = new Life(id)) {
      while (System.nanoTime() < end) {
        IdemClient client = life.current();
        String process = life.process();
        String key = "register/" + r.nextInt(REGISTERS);
        int kind = r.nextInt(10);
        long start = now();
        long v = ++unique;
        try {
          if (kind < 4) {
            Optional<KeyValue> kv = client.get(key);
            lastVersion.put(key, kv.map(KeyValue::version).orElse(0L));
            Long value = kv.map(x -> Long.parseLong(x.valueAsString())).orElse(null);
            record(process, Op.Fn.READ, key, 0, 0, start, Op.Outcome.OK, value);
          } else if (kind < 7) {
            client.put(key, Long.toString(v));
            record(process, Op.Fn.WRITE, key, v, 0, start, Op.Outcome.OK, null);
          } else {
            long expected = lastVersion.getOrDefault(key, 0L);
            boolean done =
                client
                    .compareAndSet(key, expected, Long.toString(v).getBytes(StandardCharsets.UTF_8))
                    .written();
            record(
                process,
                Op.Fn.CAS,
                key,
                v,
                expected,
                start,
                done ? Op.Outcome.OK : Op.Outcome.FAIL,
                null);
          }
        } catch (IdemException e) {
          if (kind >= 4) { // a read that failed tells nothing; a write or cas may have happened
            record(
                process,
                kind < 7 ? Op.Fn.WRITE : Op.Fn.CAS,
                key,
                v,
                lastVersion.getOrDefault(key, 0L),
                start,
                Op.Outcome.INFO,
                null);
          }
          life.after(e);
        }
      }
    }
  }

  /**
   * A lease client's loop: grant one of two names for 1.5 s; while it holds it, renew it a few
   * times a third of the TTL apart; then revoke it, or let it go (stop renewing). Names another
   * client holds are tried again after a moment.
   */
  private void leases(int id) {
    Random r = new Random(settings.seed() * 31 + id);
    try (Life life = new Life(id)) {
      while (System.nanoTime() < end) {
        IdemClient client = life.current();
        String process = life.process();
        String name = "lease/" + r.nextInt(LEASES);
        Op.Fn f = Op.Fn.GRANT;
        long start = now();
        try {
          long expiry = client.grantLease(name, Duration.ofMillis(LEASE_TTL_MS));
          record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.OK, expiry);
          boolean held = true;
          for (int k = r.nextInt(4); k > 0 && held && System.nanoTime() < end; k--) {
            Thread.sleep(LEASE_TTL_MS / 3);
            f = Op.Fn.RENEW;
            start = now();
            try {
              long e = client.keepAliveLease(name);
              record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.OK, e);
            } catch (LeaseNotFoundException gone) {
              record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.FAIL, null);
              held = false;
            }
          }
          if (held && r.nextInt(10) < 7) {
            f = Op.Fn.REVOKE;
            start = now();
            try {
              long at = client.revokeLease(name);
              record(process, f, name, 0, 0, start, Op.Outcome.OK, at);
            } catch (LeaseNotFoundException gone) {
              record(process, f, name, 0, 0, start, Op.Outcome.FAIL, null);
            }
          }
        } catch (DuplicateLeaseException taken) {
          record(process, f, name, LEASE_TTL_MS, 0, start, Op.Outcome.FAIL, null);
          Thread.sleep(20 + r.nextInt(80));
        } catch (IdemException e) {
          record(
              process,
              f,
              name,
              f == Op.Fn.REVOKE ? 0 : LEASE_TTL_MS,
              0,
              start,
              Op.Outcome.INFO,
              null);
          life.after(e);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void record(
      String process,
      Op.Fn f,
      String key,
      long value,
      long expected,
      long start,
      Op.Outcome o,
      Long result) {
    history.add(
        new Op(
            ids.incrementAndGet(),
            process,
            f,
            key,
            value,
            expected,
            0,
            start,
            o == Op.Outcome.INFO ? Long.MAX_VALUE : now(),
            o,
            result));
  }

  // ---- client processes ----

  private static long workerBase(int w) {
    return (100L + w) * 1_000_000_000L;
  }

  private Process startWorker(int w) {
    String label = "w" + w;
    return ProcessCluster.launch(
        List.of("-Xmx256m", "-XX:+UseSerialGC"),
        ClientWorker.class.getName(),
        List.of(
            String.join(",", cluster.clientAddresses()),
            dir.resolve(label + ".id").toString(),
            dir.resolve(label + ".jsonl").toString(),
            label,
            Long.toString(workerBase(w)),
            Long.toString(t0),
            Long.toString(end),
            Integer.toString(settings.window()),
            Integer.toString(LISTS),
            Long.toString(settings.seed() * 31 + 1_000 + w)),
        dir.resolve(label + ".log"));
  }

  /** Waits for the client processes to finish, and reads their journals. */
  private List<Op> awaitWorkers() throws InterruptedException, IOException {
    List<Op> ops = new ArrayList<>();
    for (int w = 0; w < workers.size(); w++) {
      Process p = workers.get(w);
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS); // what it had in flight stays unknown
        count("client process still running 120 s after the end (killed)");
      }
      ops.addAll(History.readJournal(dir.resolve("w" + w + ".jsonl")));
    }
    return ops;
  }

  // ---- faults ----

  /** The seeded fault schedule, until the end: rounds of every kind, in a shuffled order. */
  private void faults() throws InterruptedException {
    Random r = new Random(settings.seed());
    List<Fault> kinds = new ArrayList<>();
    if (settings.atLeastOnce()) {
      // The negative control hits the leader: that leaves calls applied but unanswered.
      kinds.addAll(List.of(Fault.KILL_LEADER, Fault.PAUSE_LEADER, Fault.LOSE_RESPONSES));
    } else {
      for (Fault f : Fault.values()) {
        if (f != Fault.KILL_CLIENT_PROCESS || !workers.isEmpty()) {
          kinds.add(f);
        }
      }
    }
    List<Fault> round = new ArrayList<>();
    long every = settings.faultEvery().toMillis();
    int rounds = 0;
    long faultMs = 0; // how long the faults injected so far took, and how many
    int injected = 0;
    while (System.nanoTime() < end) {
      long pause = every / 2 + r.nextInt((int) Math.max(1, every));
      if (rounds == 0 || (rounds == 1 && !round.isEmpty())) {
        // The first round must finish within the run, also on a loaded machine where faults take
        // longer: the pauses shrink so that the kinds still due, each taking as long as the faults
        // so far did on average, fit into the time left.
        int due = round.isEmpty() ? kinds.size() : round.size();
        long left = (end - System.nanoTime()) / 1_000_000;
        long each = injected == 0 ? every : faultMs / injected;
        pause = Math.max(0, Math.min(pause, (left - due * each) / (due + 1)));
      }
      Thread.sleep(pause);
      if (System.nanoTime() >= end) {
        break;
      }
      if (round.isEmpty()) {
        round.addAll(kinds);
        Collections.shuffle(round, r);
        rounds++;
      }
      long start = System.nanoTime();
      inject(round.remove(round.size() - 1), r);
      faultMs += (System.nanoTime() - start) / 1_000_000;
      injected++;
    }
  }

  private void inject(Fault fault, Random r) throws InterruptedException {
    Optional<Integer> leader = cluster.leader();
    int n = cluster.size();
    int any = r.nextInt(n);
    int follower = leader.map(l -> (l + 1 + r.nextInt(n - 1)) % n).orElse(any);
    int target = leader.orElse(any);
    switch (fault) {
      case KILL_LEADER, KILL_FOLLOWER, PAUSE_LEADER, PAUSE_FOLLOWER -> {
        boolean kill = fault == Fault.KILL_LEADER || fault == Fault.KILL_FOLLOWER;
        boolean onLeader = fault == Fault.KILL_LEADER || fault == Fault.PAUSE_LEADER;
        int victim = onLeader ? target : follower;
        if (kill) {
          cluster.kill(victim);
        } else {
          cluster.pause(victim);
        }
        count(
            (kill ? "kill -9 " : "SIGSTOP ")
                + (leader.isEmpty() ? "node (no leader known)" : onLeader ? "leader" : "follower"));
        Thread.sleep(1_000 + r.nextInt(2_000)); // past the 300-600 ms election timeout
        if (kill) {
          cluster.start(victim);
        } else {
          cluster.resume(victim);
        }
      }
      case LOSE_RESPONSES -> {
        // Requests still reach the node and are applied; the answers vanish, then the
        // connections break, and the clients resend.
        cluster.proxy(target).blackholeResponses();
        count("responses lost");
        Thread.sleep(300 + r.nextInt(1_200));
        cluster.proxy(target).resetConnections();
        cluster.proxy(target).passResponses();
      }
      case RESET_CONNECTIONS -> {
        cluster.proxy(target).resetConnections();
        count("connections reset");
      }
      case DELAY -> {
        int victim = r.nextBoolean() ? target : any;
        cluster.proxy(victim).delay(Duration.ofMillis(20 + r.nextInt(180)));
        count("client traffic delayed");
        Thread.sleep(1_000 + r.nextInt(2_000));
        cluster.proxy(victim).delay(Duration.ZERO);
      }
      case KILL_CLIENT_PROCESS -> {
        int w = r.nextInt(workers.size());
        Process p = workers.get(w);
        if (!p.isAlive()) {
          return;
        }
        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        count("kill -9 client process");
        Thread.sleep(500 + r.nextInt(1_500));
        workers.set(w, startWorker(w));
      }
      case WIPE_LEADER -> wipe(leader);
      case REPLACE_NODE -> {
        try {
          cluster.replaceWiped(r.nextBoolean() ? target : follower, Duration.ofSeconds(60));
          count("replace node (wiped, rejoined as a new member)");
          // The members restart one by one onto the peer links, so that later partitions cut
          // the new member's traffic too.
          cluster.relink(Duration.ofSeconds(60));
        } catch (RuntimeException e) {
          count("replace node failed: " + e.getMessage());
        }
      }
      case ISOLATE_LEADER, SPLIT_MAJORITY, BRIDGE, ONE_WAY, HALF_OPEN_PEER_LINK ->
          count(new PeerFaults(cluster).inject(PeerFaults.Kind.valueOf(fault.name()), r));
    }
  }

  /**
   * Kills the leader and deletes its data; once the others elected a leader (whose view of the
   * wiped node starts afresh, and who holds every committed entry), restarts it empty and waits
   * until it caught up, by snapshot install when the leader's log was purged.
   */
  private void wipe(Optional<Integer> known) throws InterruptedException {
    // No leader known: an election is under way (the previous fault hit the leader).
    Optional<Integer> leader =
        known.isPresent() ? known : watch.leaderWithin(Duration.ofSeconds(10));
    if (leader.isEmpty()) {
      count("wipe leader (skipped: no leader for 10 s)");
      return;
    }
    int victim = leader.get();
    cluster.wipe(victim);
    Optional<Integer> next = watch.leaderWithin(Duration.ofSeconds(60));
    if (next.isEmpty()) {
      // Restarting it empty now could let it vote for a node that lacks committed entries.
      throw new IllegalStateException(
          "no leader among the other nodes 60 s after wiping "
              + cluster.id(victim)
              + ": the campaign cannot go on safely");
    }
    // The new leader was elected by the others, so it holds every committed entry, and every live
    // node's term is at least its term: the empty node, which voted in none of those terms, cannot
    // vote twice in one.
    cluster.start(victim);
    long target = cluster.status(next.get()).map(StatusReply::getAppliedIndex).orElse(0L);
    Optional<StatusReply> s = watch.appliedWithin(victim, target, Duration.ofSeconds(60));
    if (s.isEmpty()) {
      count("wipe leader (not caught up in 60 s)");
      return;
    }
    count(
        s.get().getLogStartIndex() > 1
            ? "wipe leader (rejoined by snapshot install)"
            : "wipe leader (rejoined by log replay)");
  }

  private void count(String fault) {
    faults.merge(fault, 1L, Long::sum);
  }

  private long now() {
    return System.nanoTime() - t0;
  }
}
