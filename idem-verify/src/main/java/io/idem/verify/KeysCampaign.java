package io.idem.verify;

import io.idem.client.IdemClient;
import io.idem.client.KeyRecord;
import io.idem.client.KeyValue;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * The keys campaign: payment workers ({@link PaymentWorker}, processes of their own) process one
 * stream of payments with application idempotency keys on a 3-node cluster of real server processes
 * behind fault proxies, while a seeded schedule kills workers mid-operation (SIGKILL), pauses them
 * past their keys' deadline (SIGSTOP, then SIGCONT, so that they try to write after a takeover),
 * loses responses and kills the leader. Then every started payment is settled without faults, and
 * the checker reads the ledgers, the payments' status records and the key records, and proves:
 *
 * <ul>
 *   <li>every payment is applied exactly once: its ledger entry appears once ({@link
 *       Violation.Kind#DUPLICATE} if more, {@link Violation.Kind#LOST} if none);
 *   <li>every acknowledged payment is present, and the answer a worker gave is the stored one;
 *   <li>no stale write landed: the ledger entry and the status record carry the token the key was
 *       completed under ({@link Violation.Kind#STALE_WRITE}).
 * </ul>
 *
 * <p>The negative control runs the same workers with unfenced writes (seed 001's scheme): a paused
 * owner's late writes land, and the checker must say so.
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
   * @param fenced false for the negative control: unfenced writes
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
      boolean fenced) {

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
          !negativeControl);
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
          !negativeControl);
    }

    /** The same settings, running for {@code d}. */
    public Settings lasting(Duration d) {
      return new Settings(
          seed, d, workers, lanes, accounts, inProgress, businessMs, faultEvery, fenced);
    }
  }

  /**
   * What a run found.
   *
   * @param seed the seed
   * @param payments payments started (and settled)
   * @param acknowledged worker answers, duplicates (the same payment answered by several) included
   * @param refusals fenced refusals the workers met (stale puts and completions refused)
   * @param faults faults injected, by kind
   * @param violations what the checker found
   * @param dir where the servers' and workers' logs and journals are
   */
  public record Report(
      long seed,
      long payments,
      long acknowledged,
      long refusals,
      Map<String, Long> faults,
      List<Violation> violations,
      Path dir) {}

  private enum Fault {
    KILL_WORKER,
    PAUSE_WORKER,
    LOSE_RESPONSES,
    KILL_LEADER
  }

  private final Path dir;
  private final Settings s;
  private final Random random;
  private final Map<String, Long> faults = new TreeMap<>();
  private final Process[] workers;

  private KeysCampaign(Path dir, Settings s) {
    this.dir = dir;
    this.s = s;
    this.random = new Random(s.seed());
    this.workers = new Process[s.workers()];
  }

  /** Runs a campaign in {@code dir} (created if needed). */
  public static Report run(Path dir, Settings s) throws Exception {
    Files.createDirectories(dir);
    return new KeysCampaign(dir, s).run();
  }

  private Report run() throws Exception {
    try (ProcessCluster cluster = new ProcessCluster(dir.resolve("cluster"), 3)) {
      cluster.startAll();
      awaitLeader(cluster, Duration.ofSeconds(60));
      String servers = String.join(",", cluster.clientAddresses());
      long end = System.nanoTime() + s.duration().toNanos();
      try {
        for (int w = 0; w < workers.length; w++) {
          startWorker(w, servers, end);
        }
        injectFaults(cluster, servers, end);
        awaitWorkers(Duration.ofSeconds(60));
      } finally {
        for (Process p : workers) {
          if (p != null && p.isAlive()) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS); // SIGKILL ends a stopped one too
          }
        }
      }
      return settleAndCheck(String.join(",", cluster.directAddresses()));
    }
  }

  private Path journal(int w) {
    return dir.resolve("worker-" + w + ".journal");
  }

  private void startWorker(int w, String servers, long end) {
    workers[w] =
        ProcessCluster.launch(
            List.of("-Xmx256m", "-XX:+UseSerialGC"),
            PaymentWorker.class.getName(),
            List.of(
                servers,
                journal(w).toString(),
                Integer.toString(s.lanes()),
                Long.toString(end),
                Boolean.toString(s.fenced()),
                Long.toString(s.inProgress().toMillis()),
                Long.toString(s.businessMs()),
                Integer.toString(s.accounts())),
            dir.resolve("worker-" + w + ".log"));
  }

  private void injectFaults(ProcessCluster cluster, String servers, long end)
      throws InterruptedException {
    List<Fault> round = new ArrayList<>();
    Thread.sleep(2_000); // let the workers start
    while (System.nanoTime() < end) {
      if (round.isEmpty()) {
        round.addAll(List.of(Fault.values()));
        Collections.shuffle(round, random);
      }
      Fault f = round.remove(round.size() - 1);
      int w = random.nextInt(workers.length);
      switch (f) {
        case KILL_WORKER -> {
          workers[w].destroyForcibly().waitFor(10, TimeUnit.SECONDS);
          count("kill -9 worker");
          Thread.sleep(200 + random.nextInt(800));
          startWorker(w, servers, end);
        }
        case PAUSE_WORKER -> {
          ProcessCluster.signal(workers[w], "STOP");
          count("SIGSTOP worker past its deadline");
          Thread.sleep(s.inProgress().toMillis() * 2 + 500 + random.nextInt(1_000));
          ProcessCluster.signal(workers[w], "CONT");
        }
        case LOSE_RESPONSES -> {
          Optional<Integer> leader = cluster.leader();
          int target = leader.orElse(random.nextInt(cluster.size()));
          cluster.proxy(target).blackholeResponses();
          count("responses lost");
          Thread.sleep(300 + random.nextInt(1_200));
          cluster.proxy(target).resetConnections();
          cluster.proxy(target).passResponses();
        }
        case KILL_LEADER -> {
          Optional<Integer> leader = cluster.leader();
          if (leader.isPresent()) {
            cluster.kill(leader.get());
            count("kill -9 leader");
            Thread.sleep(500 + random.nextInt(1_000));
            cluster.start(leader.get());
          }
        }
      }
      long gap = (long) (s.faultEvery().toMillis() * (0.5 + random.nextDouble()));
      Thread.sleep(Math.max(0, Math.min(gap, (end - System.nanoTime()) / 1_000_000)));
    }
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

  private static void awaitLeader(ProcessCluster cluster, Duration timeout)
      throws InterruptedException {
    long until = System.nanoTime() + timeout.toNanos();
    while (cluster.leader().isEmpty()) {
      if (System.nanoTime() > until) {
        throw new IllegalStateException("no leader within " + timeout);
      }
      Thread.sleep(200);
    }
  }

  /** One worker answer: payment {@code i} answered {@code response}. */
  private record Ack(long i, String response, int worker) {}

  /**
   * Settles every started payment (without faults: a payment left in progress by a killed worker is
   * taken over after its deadline), then checks.
   */
  private Report settleAndCheck(String servers) throws IOException {
    List<Ack> acks = new ArrayList<>();
    long refusals = 0;
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
                acks.add(new Ack(Long.parseLong(f[2]), f[3], w));
              }
            }
            case "refused" -> refusals++;
            default -> {}
          }
        } catch (RuntimeException torn) {
          // a line cut by a kill -9
        }
      }
    }
    List<Violation> violations = new ArrayList<>();
    try (IdemClient client =
        IdemClient.builder().servers(servers).requestTimeout(Duration.ofSeconds(60)).build()) {
      PaymentWorker settler =
          PaymentWorker.settler(client, s.fenced(), s.inProgress(), s.businessMs(), s.accounts());
      for (long i = 0; i <= started; i++) {
        if (settler.pay(i, System.nanoTime() + TimeUnit.SECONDS.toNanos(60)) == null) {
          violations.add(
              new Violation(Violation.Kind.LOST, PaymentWorker.key(i), "could not be settled"));
        }
      }
      check(client, started, acks, violations);
    }
    return new Report(
        s.seed(),
        started + 1,
        acks.size(),
        refusals,
        Map.copyOf(faults),
        List.copyOf(violations),
        dir);
  }

  private void check(IdemClient client, long started, List<Ack> acks, List<Violation> out) {
    // Ledger entries by payment: i -> tokens of its entries.
    Map<Long, List<Long>> entries = new HashMap<>();
    for (int a = 0; a < s.accounts(); a++) {
      Optional<KeyValue> ledger = client.get("ledger/" + a);
      if (ledger.isEmpty()) {
        continue;
      }
      for (byte[] e : ledger.get().elements()) {
        String[] f = new String(e, StandardCharsets.UTF_8).split(":");
        long i = Long.parseLong(f[0]);
        if (PaymentWorker.account(i, s.accounts()) != a
            || Long.parseLong(f[1]) != PaymentWorker.amount(i)) {
          out.add(
              new Violation(
                  Violation.Kind.PHANTOM, "ledger/" + a, "an entry nobody wrote: " + f[0]));
        }
        entries.computeIfAbsent(i, k -> new ArrayList<>()).add(Long.parseLong(f[2]));
      }
    }
    Map<Long, String> stored = new HashMap<>();
    for (long i = 0; i <= started; i++) {
      String key = PaymentWorker.key(i);
      Optional<KeyRecord> r = client.getKey(PaymentWorker.SCOPE, key);
      List<Long> tokens = entries.getOrDefault(i, List.of());
      if (tokens.size() > 1) {
        out.add(
            new Violation(
                Violation.Kind.DUPLICATE,
                key,
                "paid " + tokens.size() + " times, tokens " + tokens));
      }
      if (r.isEmpty() || !r.get().completed()) {
        out.add(new Violation(Violation.Kind.LOST, key, "no completed key record"));
        continue;
      }
      long token = r.get().token();
      stored.put(i, new String(r.get().response(), StandardCharsets.UTF_8));
      if (tokens.isEmpty()) {
        out.add(new Violation(Violation.Kind.LOST, key, "completed, but no ledger entry"));
      }
      for (long t : tokens) {
        if (t != token) {
          out.add(
              new Violation(
                  Violation.Kind.STALE_WRITE,
                  key,
                  "a ledger entry of token " + t + "; the key was completed under " + token));
        }
      }
      Optional<KeyValue> status = client.get("payment/" + i);
      long statusToken = status.map(v -> Long.parseLong(v.valueAsString())).orElse(-1L);
      if (statusToken != token) {
        out.add(
            new Violation(
                Violation.Kind.STALE_WRITE,
                "payment/" + i,
                "status written by token " + statusToken + "; completed under " + token));
      }
    }
    for (Ack a : acks) {
      String want = stored.get(a.i());
      if (!a.response().equals(want)) {
        out.add(
            new Violation(
                Violation.Kind.LOST,
                PaymentWorker.key(a.i()),
                "worker " + a.worker() + " answered \"" + a.response() + "\"; stored: " + want));
      }
    }
  }
}
