package io.idem.verify;

import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.IdemTimeoutException;
import io.idem.client.InvalidArgumentException;
import io.idem.client.KeyValue;
import io.idem.client.OutcomeUnknownException;
import io.idem.proto.StatusReply;
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
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A fault campaign: real server processes, concurrent clients appending unique elements to lists
 * and incrementing counters while a seeded schedule kills (SIGKILL) and pauses (SIGSTOP) nodes,
 * then final reads, the checkers, and the replicas' digests. Every operation is recorded in a JSON
 * lines history next to the servers' logs.
 */
public final class Campaign {

  /**
   * What to run.
   *
   * @param seed the fault schedule's and the workload's seed
   * @param nodes servers (3 or 5)
   * @param duration how long the clients run
   * @param appendClients clients appending to lists
   * @param counterClients clients incrementing counters
   * @param registerClients clients reading, writing and compare-and-setting registers
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
      Duration faultEvery,
      boolean atLeastOnce) {

    /**
     * The ci profile (part of {@code ./mvnw verify} as CampaignTest, and {@code idem verify}): 3
     * nodes, 4 appending, 2 incrementing and 2 register clients, 40 s with a fault every 5 s on
     * average (the negative control: no register clients, 30 s, every 3 s).
     */
    public static Settings ci(long seed, boolean atLeastOnce) {
      return new Settings(
          seed,
          3,
          Duration.ofSeconds(atLeastOnce ? 30 : 40),
          4,
          2,
          atLeastOnce ? 0 : 2, // its 300 ms timeouts leave the register search too many unknowns
          Duration.ofSeconds(atLeastOnce ? 3 : 5),
          atLeastOnce);
    }

    /** The long profile: 3 nodes, 8 + 4 + 4 clients, 30 minutes, a fault every 3 s on average. */
    public static Settings longRun(long seed, boolean atLeastOnce) {
      return new Settings(
          seed, 3, Duration.ofMinutes(30), 8, 4, 4, Duration.ofSeconds(3), atLeastOnce);
    }

    /** The same settings, running for {@code d}. */
    public Settings lasting(Duration d) {
      return new Settings(
          seed, nodes, d, appendClients, counterClients, registerClients, faultEvery, atLeastOnce);
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

  private static final int LISTS = 4;
  private static final int COUNTERS = 2;
  private static final int REGISTERS = 2;

  private final Path dir;
  private final Settings settings;
  private final List<Op> history = Collections.synchronizedList(new ArrayList<>());
  private final AtomicLong ids = new AtomicLong();
  private final Map<String, Long> faults = new ConcurrentHashMap<>();
  private final long t0 = System.nanoTime();

  private Campaign(Path dir, Settings settings) {
    this.dir = dir;
    this.settings = settings;
  }

  /** Runs a campaign in {@code dir} (servers' data and logs, and the history file). */
  public static Report run(Path dir, Settings settings) throws Exception {
    return new Campaign(dir, settings).run();
  }

  private Report run() throws Exception {
    try (ProcessCluster cluster = new ProcessCluster(dir, settings.nodes())) {
      cluster.startAll();
      awaitLeader(cluster, Duration.ofSeconds(60));
      List<IdemClient> clients = new ArrayList<>();
      List<Thread> threads = new ArrayList<>();
      long end = System.nanoTime() + settings.duration().toNanos();
      int n = settings.appendClients() + settings.counterClients() + settings.registerClients();
      for (int c = 0; c < n; c++) {
        IdemClient client =
            IdemClient.builder()
                .servers(cluster.clientAddresses())
                .requestTimeout(
                    settings.atLeastOnce() ? Duration.ofMillis(300) : Duration.ofSeconds(20))
                .stallTimeout(Duration.ofSeconds(2))
                .window(8)
                .build();
        clients.add(client);
        int id = c;
        Random random = new Random(settings.seed() * 31 + id);
        boolean appender = c < settings.appendClients();
        boolean register = c >= settings.appendClients() + settings.counterClients();
        Runnable loop =
            register
                ? () -> registers(client, id, end, random)
                : () -> workload(client, id, appender, end, random);
        Thread t = new Thread(loop, "workload-" + c);
        threads.add(t);
        t.start();
      }
      faults(cluster, end);
      for (Thread t : threads) {
        t.join();
      }
      long retries = clients.stream().mapToLong(IdemClient::retries).sum();
      for (IdemClient c : clients) {
        c.close();
      }
      for (int i = 0; i < cluster.size(); i++) {
        cluster.resume(i);
        if (!cluster.isRunning(i)) {
          cluster.start(i);
        }
      }
      awaitLeader(cluster, Duration.ofSeconds(60));
      List<Violation> violations = new ArrayList<>();
      Map<String, List<Long>> lists = new HashMap<>();
      Map<String, Long> counters = new HashMap<>();
      try (IdemClient reader =
          IdemClient.builder()
              .servers(cluster.clientAddresses())
              .requestTimeout(Duration.ofSeconds(60))
              .build()) {
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
      List<Op> ops;
      synchronized (history) {
        ops = new ArrayList<>(history);
      }
      violations.addAll(ListAppendChecker.check(ops, lists));
      violations.addAll(CounterChecker.check(ops, counters));
      List<String> undecided = new ArrayList<>();
      violations.addAll(RegisterChecker.check(ops, 20_000_000, undecided));
      long duplicates = convergence(cluster, violations);
      Path file = dir.resolve("history.jsonl");
      History.write(file, ops);
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
          retries,
          duplicates,
          violations,
          undecided,
          file);
    }
  }

  /** One client's loop: issue, record, repeat. */
  private void workload(IdemClient client, int id, boolean appender, long end, Random r) {
    long seq = 0;
    long element = (long) id * 1_000_000_000L;
    while (System.nanoTime() < end) {
      seq++;
      String key = appender ? "list/" + r.nextInt(LISTS) : "counter/" + r.nextInt(COUNTERS);
      long value = appender ? ++element : 1;
      long start = now();
      Op.Outcome outcome;
      Long result = null;
      while (true) {
        try {
          result =
              appender
                  ? client.append(key, Long.toString(value).getBytes(StandardCharsets.UTF_8))
                  : client.increment(key, value);
          outcome = Op.Outcome.OK;
          break;
        } catch (IdemTimeoutException | OutcomeUnknownException e) {
          outcome = Op.Outcome.INFO;
        } catch (InvalidArgumentException e) {
          outcome = Op.Outcome.FAIL;
          break;
        } catch (IdemException e) {
          outcome = Op.Outcome.INFO; // fenced or closed: whatever was in flight is unknown
          break;
        }
        if (!settings.atLeastOnce() || System.nanoTime() >= end) {
          break;
        }
        // The negative control: the same operation again, as a new call with a new number.
      }
      long stop = now();
      history.add(
          new Op(
              ids.incrementAndGet(),
              "c" + id,
              appender ? Op.Fn.APPEND : Op.Fn.INCR,
              key,
              value,
              0,
              seq,
              start,
              outcome == Op.Outcome.INFO ? Long.MAX_VALUE : stop,
              outcome,
              appender ? null : result));
      if (outcome == Op.Outcome.INFO && !settings.atLeastOnce()) {
        return; // its session is gone or fenced: this client stops, as a crashed one would
      }
    }
  }

  /**
   * A register client's loop: linearizable reads, writes of unique values, and compare-and-sets at
   * the version its last read saw, on a few keys.
   */
  private void registers(IdemClient client, int id, long end, Random r) {
    long unique = (long) id * 1_000_000_000L;
    Map<String, Long> lastVersion = new HashMap<>();
    while (System.nanoTime() < end) {
      String key = "register/" + r.nextInt(REGISTERS);
      int kind = r.nextInt(10);
      long start = now();
      try {
        if (kind < 4) {
          Optional<KeyValue> kv = client.get(key);
          lastVersion.put(key, kv.map(KeyValue::version).orElse(0L));
          Long value = kv.map(v -> Long.parseLong(v.valueAsString())).orElse(null);
          record(id, Op.Fn.READ, key, 0, 0, start, Op.Outcome.OK, value);
        } else if (kind < 7) {
          long v = ++unique;
          client.put(key, Long.toString(v));
          record(id, Op.Fn.WRITE, key, v, 0, start, Op.Outcome.OK, null);
        } else {
          long v = ++unique;
          long expected = lastVersion.getOrDefault(key, 0L);
          boolean done =
              client.compareAndSet(
                  key, expected, Long.toString(v).getBytes(StandardCharsets.UTF_8));
          record(
              id, Op.Fn.CAS, key, v, expected, start, done ? Op.Outcome.OK : Op.Outcome.FAIL, null);
        }
      } catch (IdemException e) {
        if (kind >= 4) { // a read that failed tells nothing; a write or cas may have happened
          long v = unique;
          record(
              id,
              kind < 7 ? Op.Fn.WRITE : Op.Fn.CAS,
              key,
              v,
              lastVersion.getOrDefault(key, 0L),
              start,
              Op.Outcome.INFO,
              null);
        }
        if (!(e instanceof IdemTimeoutException) && !(e instanceof OutcomeUnknownException)) {
          return; // fenced or closed
        }
      }
    }
  }

  private void record(
      int client,
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
            "c" + client,
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

  /** The seeded fault schedule, until {@code end}. */
  private void faults(ProcessCluster cluster, long end) throws InterruptedException {
    Random r = new Random(settings.seed());
    long every = settings.faultEvery().toMillis();
    while (System.nanoTime() < end) {
      Thread.sleep(every / 2 + r.nextInt((int) Math.max(1, every)));
      if (System.nanoTime() >= end) {
        break;
      }
      Optional<Integer> leader = cluster.leader();
      // The negative control always hits the leader: that is what leaves calls applied but
      // unanswered, for its clients to send again.
      int victim =
          switch (settings.atLeastOnce() ? 0 : r.nextInt(4)) {
            case 0, 1 -> leader.orElse(r.nextInt(cluster.size()));
            default ->
                leader
                    .map(l -> (l + 1 + r.nextInt(cluster.size() - 1)) % cluster.size())
                    .orElse(r.nextInt(cluster.size()));
          };
      boolean isLeader = leader.isPresent() && leader.get() == victim;
      if (r.nextBoolean()) {
        cluster.kill(victim);
        count(isLeader ? "kill -9 leader" : "kill -9 follower");
        Thread.sleep(1_000 + r.nextInt(2_000));
        cluster.start(victim);
      } else {
        cluster.pause(victim);
        count(isLeader ? "SIGSTOP leader" : "SIGSTOP follower");
        Thread.sleep(1_000 + r.nextInt(2_000)); // past the 300-600 ms election timeout
        cluster.resume(victim);
      }
    }
  }

  private void count(String fault) {
    faults.merge(fault, 1L, Long::sum);
  }

  /**
   * Waits until every node reported the same digest at some applied index (a follower trails the
   * leader by up to one entry for a heartbeat), recording a divergence otherwise; returns the
   * duplicates the leader suppressed.
   */
  private static long convergence(ProcessCluster cluster, List<Violation> violations)
      throws InterruptedException {
    List<Map<Long, String>> seen = new ArrayList<>();
    for (int i = 0; i < cluster.size(); i++) {
      seen.add(new HashMap<>());
    }
    long duplicates = 0;
    long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
    while (System.nanoTime() < deadline) {
      for (int i = 0; i < cluster.size(); i++) {
        Optional<StatusReply> s = cluster.status(i);
        if (s.isPresent()) {
          seen.get(i).put(s.get().getAppliedIndex(), s.get().getDigest());
          if (s.get().getRole().equals("LEADER")) {
            duplicates = s.get().getDuplicatesSuppressed();
          }
        }
      }
      for (Map.Entry<Long, String> e : seen.get(0).entrySet()) {
        boolean everywhere = true;
        for (int i = 1; i < cluster.size(); i++) {
          String d = seen.get(i).get(e.getKey());
          if (d == null) {
            everywhere = false;
          } else if (!d.equals(e.getValue())) {
            violations.add(
                new Violation(
                    Violation.Kind.DIVERGENCE,
                    "*",
                    "at applied index " + e.getKey() + " " + cluster.id(i) + " differs from n1"));
            return duplicates;
          }
        }
        if (everywhere) {
          return duplicates;
        }
      }
      Thread.sleep(50);
    }
    violations.add(
        new Violation(
            Violation.Kind.DIVERGENCE,
            "*",
            "the replicas did not reach a common applied index in 60 s"));
    return duplicates;
  }

  private static void awaitLeader(ProcessCluster cluster, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (System.nanoTime() < deadline) {
      if (cluster.leader().isPresent()) {
        return;
      }
      Thread.sleep(100);
    }
    throw new IllegalStateException("no leader within " + timeout);
  }

  private long now() {
    return System.nanoTime() - t0;
  }
}
