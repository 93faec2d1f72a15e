package io.idem.verify;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * The keys campaign: payment workers ({@link PaymentWorker}, processes of their own) process one
 * stream of payments with application idempotency keys on a store of real server processes, while a
 * seeded schedule kills workers mid-operation (SIGKILL), pauses them past their keys' deadline
 * (SIGSTOP, then SIGCONT, so that they try to write after a takeover), and injects the store's own
 * faults ({@link PaymentStore.Servers#faults}): on Idem (three server processes behind fault
 * proxies) lost responses and kill -9 of the leader; on Redis (one redis-server, {@code appendfsync
 * always}) kill -9 of redis-server and its restart on the same data. A profile may choose its fault
 * kinds, the store's optional ones included ({@link Settings#failovers}: only the leader's SIGSTOP,
 * with failovers longer than the keys' in-progress timeout, and the ledger written with fenced
 * appends). Then every started payment is settled without faults, and the checker reads the ledgers
 * and the key records (and, on Idem, the payments' status records), and proves:
 *
 * <ul>
 *   <li>every payment is applied exactly once: its ledger entry appears once ({@link
 *       Violation.Kind#DUPLICATE} if more, {@link Violation.Kind#LOST} if none);
 *   <li>every acknowledged payment is present, and the answer a worker gave is the stored one
 *       (where the store keeps responses);
 *   <li>no stale write landed: the ledger entry (and the status record) carry the token the key was
 *       completed under ({@link Violation.Kind#STALE_WRITE}; where the store has tokens).
 * </ul>
 *
 * <p>Negative controls, which the checker must catch: on Idem, the same workers with unfenced
 * writes ({@link Settings#fenced} false); on Redis, seed 001's algorithm ({@code seed001}).
 */
public final class KeysCampaign {

  /**
   * What to run.
   *
   * @param seed the fault schedule's seed
   * @param duration how long the workers take new payments
   * @param workers worker processes
   * @param lanes payments each worker processes at once
   * @param accounts accounts the payments debit
   * @param inProgress a key's in-progress timeout (log time)
   * @param businessMs how long one payment's business step takes
   * @param faultEvery mean time between faults
   * @param fenced false for Idem's negative control: unfenced writes
   * @param store the store: {@code idem}, {@code redis} or {@code seed001} ({@link
   *     PaymentStore#NAMES})
   * @param ledger where a payment's ledger entry is written ({@link Ledger#FENCED_APPEND} only on
   *     Idem, fenced)
   * @param faultKinds the fault kinds injected, by their names in {@link Report#faults}, among the
   *     workers' and the store's, its optional ones included; empty for the workers' and the
   *     store's ({@link PaymentStore.Servers#faults})
   * @param electionTimeout the least time a store with a leader takes to elect the next one ({@link
   *     PaymentStore#start(Path, Duration)}); zero for its default
   */
  public record Settings(
      long seed,
      Duration duration,
      int workers,
      int lanes,
      int accounts,
      Duration inProgress,
      long businessMs,
      Duration faultEvery,
      boolean fenced,
      String store,
      Ledger ledger,
      List<String> faultKinds,
      Duration electionTimeout) {

    /** Validates the settings. */
    public Settings {
      if (workers < 2 || lanes < 1 || accounts < 1 || businessMs < 0) {
        throw new IllegalArgumentException(
            "at least 2 workers, 1 lane and 1 account; got "
                + workers
                + ", "
                + lanes
                + ", "
                + accounts);
      }
      if (duration.isNegative() || duration.isZero() || faultEvery.toMillis() < 1) {
        throw new IllegalArgumentException("duration and faultEvery must be positive");
      }
      PaymentStore.named(store); // fails on a name it does not know
      if (!fenced && !store.equals("idem")) {
        throw new IllegalArgumentException(
            "unfenced writes are Idem's negative control; on Redis, the negative control is the"
                + " store seed001, got "
                + store);
      }
      if (ledger != Ledger.COMPLETION && !(fenced && store.equals("idem"))) {
        throw new IllegalArgumentException(
            "a fenced ledger append needs the idem store, fenced; got "
                + store
                + (fenced ? "" : ", unfenced"));
      }
      faultKinds = List.copyOf(faultKinds);
    }

    /** The writes a worker makes, as {@link PaymentStore#connect} takes them. */
    PaymentStore.Writes writes() {
      if (!fenced) {
        return PaymentStore.Writes.UNFENCED;
      }
      return switch (ledger) {
        case COMPLETION -> PaymentStore.Writes.FENCED_COMPLETION;
        case FENCED_APPEND -> PaymentStore.Writes.FENCED_LEDGER;
        case FENCED_APPEND_UNRECONCILED -> PaymentStore.Writes.FENCED_LEDGER_UNRECONCILED;
      };
    }

    /**
     * The ci profile: 3 workers of 4 lanes, 8 accounts, 1 s in-progress timeout, 100 ms business
     * steps, 45 s with a fault every 2.5 s on average, each kind in every round. The negative
     * control: unfenced, 30 s, the same faults.
     */
    public static Settings ci(long seed, boolean negativeControl) {
      return new Settings(
          seed,
          Duration.ofSeconds(negativeControl ? 30 : 45),
          3,
          4,
          8,
          Duration.ofSeconds(1),
          100,
          Duration.ofMillis(2_500),
          !negativeControl,
          "idem",
          Ledger.COMPLETION,
          List.of(),
          Duration.ZERO);
    }

    /**
     * The failovers profile (issue 36): every failover takes longer than the keys' in-progress
     * timeout (an election timeout of 1.2-2 s, a 1 s in-progress timeout), and the only fault is
     * SIGSTOP of the leader past its followers' election, every 3.5 s on average (no JVM restarts,
     * which take seconds on a loaded machine): owners' writes held up by the failover reach the new
     * leader after their deadline while duplicates wait to take over. The ledger is written with
     * fenced appends before a plain completion ({@link Ledger#FENCED_APPEND}: a takeover owner
     * reconciles). 2 workers of 4 lanes, 8 accounts, 100 ms business steps, 15 s.
     */
    public static Settings failovers(long seed) {
      return new Settings(
          seed,
          Duration.ofSeconds(15),
          2,
          4,
          8,
          Duration.ofSeconds(1),
          100,
          Duration.ofMillis(3_500),
          true,
          "idem",
          Ledger.FENCED_APPEND,
          List.of(IdemPayments.PAUSE_LEADER),
          Duration.ofMillis(1_200));
    }

    /** The long profile: 4 workers of 8 lanes, 30 minutes, a fault every 2 s on average. */
    public static Settings longRun(long seed, boolean negativeControl) {
      return new Settings(
          seed,
          Duration.ofMinutes(30),
          4,
          8,
          16,
          Duration.ofSeconds(1),
          100,
          Duration.ofSeconds(2),
          !negativeControl,
          "idem",
          Ledger.COMPLETION,
          List.of(),
          Duration.ZERO);
    }

    /** The same settings, running for {@code d}. */
    public Settings lasting(Duration d) {
      return new Settings(
          seed,
          d,
          workers,
          lanes,
          accounts,
          inProgress,
          businessMs,
          faultEvery,
          fenced,
          store,
          ledger,
          faultKinds,
          electionTimeout);
    }

    /** The same settings, writing the ledger as {@code l}. */
    public Settings writing(Ledger l) {
      return new Settings(
          seed,
          duration,
          workers,
          lanes,
          accounts,
          inProgress,
          businessMs,
          faultEvery,
          fenced,
          store,
          l,
          faultKinds,
          electionTimeout);
    }

    /** The same settings, on the store named {@code name} ({@link PaymentStore#NAMES}). */
    public Settings on(String name) {
      return new Settings(
          seed,
          duration,
          workers,
          lanes,
          accounts,
          inProgress,
          businessMs,
          faultEvery,
          fenced,
          name,
          ledger,
          faultKinds,
          electionTimeout);
    }

    /** Whether the checker must flag this run: a negative control (unfenced, or seed 001). */
    public boolean expectsViolations() {
      return !fenced || PaymentStore.named(store).capabilities().expectsViolations();
    }
  }

  /** Where a payment's ledger entry is written. */
  public enum Ledger {
    /**
     * With the completion: its effect on Idem, in its script on Redis, in its transaction on
     * PostgreSQL. The entry lands with the stored answer or not at all.
     */
    COMPLETION,
    /**
     * As a fenced append of its own, before a plain completion (Idem): refused once the owner's
     * token no longer holds the key, but an entry that landed stays if the completion does not, so
     * an owner that took the key over reconciles with the ledger before it appends.
     */
    FENCED_APPEND,
    /**
     * As {@link #FENCED_APPEND}, without the reconciliation: a takeover owner appends again. Pays
     * twice whenever an entry landed and its owner's completion came after a takeover; a
     * measurement of what the fence alone prevents, not a setting that must hold.
     */
    FENCED_APPEND_UNRECONCILED
  }

  /** The stores a campaign can run on: {@code idem}, {@code redis}, {@code seed001}. */
  public static List<String> stores() {
    return PaymentStore.NAMES;
  }

  /**
   * What a run found.
   *
   * @param seed the seed
   * @param store the store it ran on
   * @param payments payments started (and settled)
   * @param acknowledged worker answers, duplicates (the same payment answered by several) included
   * @param refusals fenced refusals the workers met (stale puts and completions refused)
   * @param lateRefusals of those, fenced writes refused because their owner's deadline had passed
   *     although the key still had their token (log format 8)
   * @param faults faults injected, by kind
   * @param violations what the checker found
   * @param dir where the servers' and workers' logs and journals are
   */
  public record Report(
      long seed,
      String store,
      long payments,
      long acknowledged,
      long refusals,
      long lateRefusals,
      Map<String, Long> faults,
      List<Violation> violations,
      Path dir) {}

  /** The workers' faults; the store's own follow them in each round. */
  private static final String KILL_WORKER = "kill -9 worker";

  private static final String PAUSE_WORKER = "SIGSTOP worker past its deadline";

  private final Path dir;
  private final Settings s;
  private final PaymentStore store;
  private final Random random;
  private final Map<String, Long> faults = new TreeMap<>();
  private final Process[] workers;

  private KeysCampaign(Path dir, Settings s) {
    this.dir = dir;
    this.s = s;
    this.store = PaymentStore.named(s.store());
    this.random = new Random(s.seed());
    this.workers = new Process[s.workers()];
  }

  /** Runs a campaign in {@code dir} (created if needed). */
  public static Report run(Path dir, Settings s) throws Exception {
    Files.createDirectories(dir);
    return new KeysCampaign(dir, s).run();
  }

  private Report run() throws Exception {
    try (PaymentStore.Servers servers = store.start(dir, s.electionTimeout())) {
      long end = System.nanoTime() + s.duration().toNanos();
      try {
        for (int w = 0; w < workers.length; w++) {
          startWorker(w, servers.workerAddress(), end);
        }
        injectFaults(servers, end);
        awaitWorkers(Duration.ofSeconds(60));
      } finally {
        for (Process p : workers) {
          if (p != null && p.isAlive()) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS); // SIGKILL ends a stopped one too
          }
        }
      }
      return settleAndCheck(servers.directAddress());
    }
  }

  private Path journal(int w) {
    return dir.resolve("worker-" + w + ".journal");
  }

  private void startWorker(int w, String address, long end) {
    workers[w] =
        ProcessCluster.launch(
            List.of("-Xmx256m", "-XX:+UseSerialGC"),
            PaymentWorker.class.getName(),
            List.of(
                store.name(),
                address,
                journal(w).toString(),
                Integer.toString(s.lanes()),
                Long.toString(end),
                s.writes().name(),
                Long.toString(s.inProgress().toMillis()),
                Long.toString(s.businessMs()),
                Integer.toString(s.accounts())),
            dir.resolve("worker-" + w + ".log"));
  }

  /**
   * Rounds of faults: each round is every worker fault and every store fault, shuffled by the
   * seeded random, with a pause of about {@code faultEvery} after each.
   */
  private void injectFaults(PaymentStore.Servers servers, long end) throws InterruptedException {
    List<String> kinds = new ArrayList<>(List.of(KILL_WORKER, PAUSE_WORKER));
    Map<String, PaymentStore.Fault> storeFaults = new HashMap<>();
    for (PaymentStore.Fault f : servers.faults()) {
      kinds.add(f.name());
      storeFaults.put(f.name(), f);
    }
    if (!s.faultKinds().isEmpty()) {
      for (PaymentStore.Fault f : servers.optionalFaults()) {
        kinds.add(f.name());
        storeFaults.put(f.name(), f);
      }
      if (!kinds.containsAll(s.faultKinds())) {
        throw new IllegalArgumentException(
            "fault kinds " + s.faultKinds() + " not all among this store's: " + kinds);
      }
      kinds.retainAll(s.faultKinds());
    }
    List<String> round = new ArrayList<>();
    Thread.sleep(2_000); // let the workers start
    while (System.nanoTime() < end) {
      if (round.isEmpty()) {
        round.addAll(kinds);
        Collections.shuffle(round, random);
      }
      String f = round.remove(round.size() - 1);
      int w = random.nextInt(workers.length);
      if (f.equals(KILL_WORKER)) {
        workers[w].destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        count(f);
        Thread.sleep(200 + random.nextInt(800));
        startWorker(w, servers.workerAddress(), end);
      } else if (f.equals(PAUSE_WORKER)) {
        w = holder(w);
        ProcessCluster.signal(workers[w], "STOP");
        count(f);
        Thread.sleep(s.inProgress().toMillis() * 2 + 500 + random.nextInt(1_000));
        ProcessCluster.signal(workers[w], "CONT");
      } else if (storeFaults.get(f).injection().inject(random)) {
        count(f);
      }
      long gap = (long) (s.faultEvery().toMillis() * (0.5 + random.nextDouble()));
      Thread.sleep(Math.max(0, Math.min(gap, (end - System.nanoTime()) / 1_000_000)));
    }
  }

  /**
   * Worker {@code w}, or the first after it whose journal says it holds a key now (an {@code owned}
   * line not yet followed by its answer or refusal): a pause then catches an owner mid-payment, as
   * it is meant to, rather than a worker that only waits for others (owners tend to keep their
   * lanes, since the owner of one payment reaches the next first).
   */
  private int holder(int w) {
    for (int k = 0; k < workers.length; k++) {
      int candidate = (w + k) % workers.length;
      if (holdsKey(candidate)) {
        return candidate;
      }
    }
    return w;
  }

  private boolean holdsKey(int w) {
    Set<Long> held = new HashSet<>();
    try {
      for (String line : Files.readAllLines(journal(w), StandardCharsets.UTF_8)) {
        String[] f = line.split(" ", 4);
        try {
          switch (f[0]) {
            case "owned" -> held.add(Long.parseLong(f[1]));
            case "ack" -> held.remove(Long.parseLong(f[2]));
            case "refused" -> held.remove(Long.parseLong(f[1]));
            default -> {}
          }
        } catch (RuntimeException torn) {
          // a line cut by a kill -9, or being written
        }
      }
    } catch (IOException e) {
      return false; // no journal yet
    }
    return !held.isEmpty();
  }

  private void count(String what) {
    faults.merge(what, 1L, Long::sum);
  }

  private void awaitWorkers(Duration timeout) throws InterruptedException {
    long until = System.nanoTime() + timeout.toNanos();
    for (Process p : workers) {
      long left = until - System.nanoTime();
      if (!p.waitFor(Math.max(0, left), TimeUnit.NANOSECONDS)) {
        System.err.println("keys campaign: worker " + p.pid() + " did not end in time; killed");
      }
    }
  }

  /**
   * Settles every started payment (without faults: a payment left in progress by a killed worker is
   * taken over after its deadline), then checks.
   */
  private Report settleAndCheck(String servers) throws IOException {
    List<PaymentsChecker.Ack> acks = new ArrayList<>();
    long refusals = 0;
    long late = 0;
    long started = -1;
    for (int w = 0; w < workers.length; w++) {
      if (!Files.exists(journal(w))) {
        continue;
      }
      for (String line : Files.readAllLines(journal(w), StandardCharsets.UTF_8)) {
        String[] f = line.split(" ", 4);
        try {
          switch (f[0]) {
            case "start" -> started = Math.max(started, Long.parseLong(f[2]));
            case "ack" -> {
              if (f.length == 4) {
                acks.add(new PaymentsChecker.Ack(Long.parseLong(f[2]), f[3], w));
              }
            }
            case "refused" -> {
              refusals++;
              if (f.length > 2 && f[2].equals(PaymentWorker.PAST_DEADLINE)) {
                late++;
              }
            }
            default -> {}
          }
        } catch (RuntimeException torn) {
          // a line cut by a kill -9
        }
      }
    }
    List<Violation> violations = new ArrayList<>();
    try (PaymentBackend backend = store.connect(servers, s.writes(), true)) {
      PaymentWorker settler =
          PaymentWorker.settler(backend, s.inProgress(), s.businessMs(), s.accounts());
      for (long i = 0; i <= started; i++) {
        if (settler.pay(i, System.nanoTime() + TimeUnit.SECONDS.toNanos(60)) == null) {
          violations.add(
              new Violation(Violation.Kind.LOST, PaymentWorker.key(i), "could not be settled"));
        }
      }
      new PaymentsChecker(s.accounts(), store.capabilities())
          .check(backend, started, acks, violations);
    }
    return new Report(
        s.seed(),
        store.name(),
        started + 1,
        acks.size(),
        refusals,
        late,
        Map.copyOf(faults),
        List.copyOf(violations),
        dir);
  }
}
