package io.idem.verify;

import io.idem.client.IdemClient;
import io.idem.proto.StatusReply;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Failover time under a steady load (issue 16, item 3): three {@code idem server} processes on
 * loopback ({@link ProcessCluster}), one session pipelining increments at a paced rate through the
 * proxies, and a fault on the leader, over and over. For each fault it records the longest gap
 * between consecutive acknowledgements from one second before the fault until the load has flowed
 * again for {@link #SETTLED}, and prints p50, p99 and max over the faults.
 *
 * <p>Faults: {@link Kind#KILL} (SIGKILL; the node is restarted once the client moved on, and the
 * next fault waits until it has caught up and then {@link Settings#settle()}), {@link Kind#STOP}
 * (SIGSTOP, SIGCONT after {@link Settings#pause()}) and {@link Kind#ISOLATE} (the leader's peer
 * links cut both ways for {@link Settings#pause()}, on the cluster's {@link PeerNetwork}, while the
 * client still reaches it through its client proxy).
 *
 * <p>To tell the servers' share of a gap from the client's, a watcher asks the other nodes' status
 * every 20 ms from the fault on, and notes when one of them first says it leads in a later term:
 * the election. The client's share is what follows, until the first acknowledgement.
 *
 * <p>Not a test: a measurement, with its figures in docs/PERFORMANCE.md.
 */
public final class FailoverBench {

  /** The fault injected on the leader. */
  public enum Kind {
    KILL,
    STOP,
    ISOLATE
  }

  /** How long the acknowledgements must flow again before a fault counts as recovered. */
  static final Duration SETTLED = Duration.ofSeconds(2);

  /** How long before the fault the measured window starts. */
  static final Duration BEFORE = Duration.ofSeconds(1);

  /**
   * The most one fault may take to recover; a fault that takes longer counts with its gap so far,
   * and the run goes on.
   */
  static final Duration RECOVERY_LIMIT = Duration.ofSeconds(60);

  /** How long to wait for a stable leader before a fault; a fault without one is skipped. */
  static final Duration LEADER_LIMIT = Duration.ofSeconds(30);

  /** Consecutive skipped faults after which the run gives up. */
  static final int MAX_SKIPPED_IN_A_ROW = 5;

  /**
   * What to run.
   *
   * @param kind the fault
   * @param faults how many
   * @param rate increments per second, paced
   * @param pause how long a SIGSTOP or an isolation lasts
   * @param settle how long a node restarted after a kill runs before the next fault: without it,
   *     the next fault lands about 2 s after the restart, on a JVM that has barely compiled its hot
   *     paths (zero: no wait)
   */
  public record Settings(Kind kind, int faults, int rate, Duration pause, Duration settle) {
    public Settings {
      if (faults < 1 || rate < 1) {
        throw new IllegalArgumentException(
            "faults and rate must be positive, got " + faults + " and " + rate);
      }
      if (pause.isNegative() || settle.isNegative()) {
        throw new IllegalArgumentException(
            "pause and settle must not be negative, got " + pause + " and " + settle);
      }
    }
  }

  /**
   * The outcome.
   *
   * @param gapsMs the longest acknowledgement gap around each fault, in fault order
   * @param electedMs per fault, from the fault until another node said it leads in a later term (-1
   *     if none did within {@link #RECOVERY_LIMIT}: after a SIGSTOP or an isolation, the old leader
   *     may lead on)
   * @param acks acknowledgements in the whole run
   * @param failures calls that failed (before the client was closed)
   * @param skipped faults not injected: no stable leader in {@link #LEADER_LIMIT}
   */
  public record Report(
      List<Long> gapsMs, List<Long> electedMs, long acks, long failures, int skipped) {
    /** The {@code q} quantile (0..1) of the gaps, nearest rank. */
    public long quantile(double q) {
      List<Long> sorted = gapsMs.stream().sorted().toList();
      int rank = (int) Math.ceil(q * sorted.size());
      return sorted.get(Math.max(0, Math.min(sorted.size() - 1, rank - 1)));
    }
  }

  private final ProcessCluster cluster;
  private final Settings settings;
  private final PrintWriter out;
  private final Acks acks = new Acks();
  private final AtomicLong failures = new AtomicLong();
  private int skipped;

  private FailoverBench(ProcessCluster cluster, Settings settings, PrintWriter out) {
    this.cluster = cluster;
    this.settings = settings;
    this.out = out;
  }

  /** Runs the measurement in {@code dir} (data and logs of the servers), printing progress. */
  public static Report run(Path dir, Settings settings, PrintWriter out) throws Exception {
    try (ProcessCluster cluster = new ProcessCluster(dir, 3)) {
      cluster.startAll();
      return new FailoverBench(cluster, settings, out).measure();
    }
  }

  private Report measure() throws Exception {
    stableLeader(Duration.ofSeconds(60));
    List<Long> gaps = new ArrayList<>();
    List<Long> elected = new ArrayList<>();
    long failed;
    try (IdemClient client =
        IdemClient.builder()
            .servers(cluster.clientAddresses())
            .requestTimeout(Duration.ofSeconds(60))
            .build()) {
      Thread load = new Thread(() -> load(client), "failover-load");
      load.setDaemon(true);
      load.start();
      try {
        awaitFlow(System.nanoTime(), RECOVERY_LIMIT);
        int skippedInARow = 0;
        for (int k = 1; k <= settings.faults(); ) {
          int leader = stableLeader(LEADER_LIMIT);
          if (leader < 0) {
            skipped++;
            out.printf("no stable leader in %s: fault skipped%n", LEADER_LIMIT);
            out.flush();
            if (++skippedInARow >= MAX_SKIPPED_IN_A_ROW) {
              throw new IllegalStateException(skippedInARow + " faults in a row found no leader");
            }
            continue;
          }
          skippedInARow = 0;
          long term = cluster.status(leader).map(StatusReply::getTerm).orElse(-1L);
          long faultAt = System.nanoTime();
          ElectionWatch watch = new ElectionWatch(leader, term, faultAt);
          watch.start();
          inject(leader);
          long recovered = awaitFlow(faultAt, RECOVERY_LIMIT);
          long gap = acks.longestGap(faultAt - BEFORE.toNanos(), recovered);
          gaps.add(TimeUnit.NANOSECONDS.toMillis(gap));
          elected.add(watch.finish());
          out.printf(
              "fault %d/%d %s of %s: longest gap %d ms, new leader after %s, first ack after %d"
                  + " ms%n",
              k,
              settings.faults(),
              settings.kind(),
              cluster.id(leader),
              gaps.get(k - 1),
              elected.get(k - 1) < 0 ? "none" : elected.get(k - 1) + " ms",
              TimeUnit.NANOSECONDS.toMillis(acks.firstAfter(faultAt) - faultAt));
          out.flush();
          boolean restarted = !cluster.isRunning(leader);
          if (restarted) {
            cluster.start(leader);
          }
          awaitAllRunning(Duration.ofSeconds(60));
          if (restarted) {
            Thread.sleep(settings.settle().toMillis());
          }
          k++;
        }
      } finally {
        failed = failures.get(); // before closing the client fails what is still in flight
        load.interrupt();
        load.join(5_000);
      }
    }
    return new Report(gaps, elected, acks.count(), failed, skipped);
  }

  private void inject(int leader) throws InterruptedException {
    switch (settings.kind()) {
      case KILL -> cluster.kill(leader);
      case STOP -> {
        cluster.pause(leader);
        Thread.sleep(settings.pause().toMillis());
        cluster.resume(leader);
      }
      case ISOLATE -> {
        List<Integer> others = new ArrayList<>();
        for (int i = 0; i < cluster.size(); i++) {
          if (i != leader) {
            others.add(i);
          }
        }
        cluster.network().partition(List.of(leader), others);
        try {
          Thread.sleep(settings.pause().toMillis());
        } finally {
          cluster.network().healAll();
        }
      }
    }
  }

  /**
   * Asks the nodes other than the faulted leader for their status every 20 ms, from the fault on,
   * and notes when one first says it leads in a term after the old leader's.
   */
  private final class ElectionWatch extends Thread {
    private final int oldLeader;
    private final long oldTerm;
    private final long faultAt;
    private volatile long electedAt = -1;

    ElectionWatch(int oldLeader, long oldTerm, long faultAt) {
      super("failover-election-watch");
      setDaemon(true);
      this.oldLeader = oldLeader;
      this.oldTerm = oldTerm;
      this.faultAt = faultAt;
    }

    @Override
    public void run() {
      long end = faultAt + RECOVERY_LIMIT.toNanos();
      while (!isInterrupted() && System.nanoTime() < end) {
        for (int i = 0; i < cluster.size(); i++) {
          if (i != oldLeader && cluster.isRunning(i)) {
            Optional<StatusReply> s = cluster.status(i);
            if (s.isPresent()
                && s.get().getRole().equals("LEADER")
                && s.get().getTerm() > oldTerm) {
              electedAt = System.nanoTime();
              return;
            }
          }
        }
        try {
          Thread.sleep(20);
        } catch (InterruptedException e) {
          return;
        }
      }
    }

    /** Stops watching; returns ms from the fault to the election, or -1 if none was seen. */
    long finish() throws InterruptedException {
      interrupt();
      join(5_000);
      long at = electedAt;
      return at < 0 ? -1 : TimeUnit.NANOSECONDS.toMillis(at - faultAt);
    }
  }

  /**
   * Pipelines increments at the paced rate until interrupted; acknowledgements go to {@link #acks}.
   */
  private void load(IdemClient client) {
    long interval = TimeUnit.SECONDS.toNanos(1) / settings.rate();
    long next = System.nanoTime();
    while (!Thread.currentThread().isInterrupted()) {
      next += interval;
      long wait = next - System.nanoTime();
      if (wait > 0) {
        LockSupport.parkNanos(wait);
      }
      try {
        client
            .incrementAsync("failover", 1)
            .whenComplete(
                (v, e) -> {
                  if (e == null) {
                    acks.add();
                  } else if (failures.incrementAndGet() == 1) {
                    out.println("first failed call: " + e);
                    out.flush();
                  }
                });
      } catch (RuntimeException e) {
        failures.incrementAndGet();
      }
    }
  }

  /**
   * Waits until acknowledgements after {@code since} have flowed for {@link #SETTLED} without a gap
   * longer than half a second; returns that moment.
   */
  private long awaitFlow(long since, Duration limit) throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    long settled = SETTLED.toNanos();
    long maxGap = TimeUnit.MILLISECONDS.toNanos(500);
    while (System.nanoTime() < end) {
      Thread.sleep(100);
      long now = System.nanoTime();
      long from = Math.max(since, now - settled);
      if (now - since >= settled
          && acks.countBetween(from, now) > 0
          && acks.longestGap(from, now) < maxGap
          && acks.firstAfter(since) <= now - settled) {
        return now;
      }
    }
    out.printf("the load did not flow again within %s; the gap counts as measured so far%n", limit);
    return System.nanoTime();
  }

  /** Waits for a leader that held its term for a second; returns its index, or -1 if none. */
  private int stableLeader(Duration limit) throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    int last = -1;
    long lastTerm = -1;
    long since = 0;
    while (System.nanoTime() < end) {
      Optional<Integer> l = cluster.leader();
      long term = l.flatMap(cluster::status).map(StatusReply::getTerm).orElse(-1L);
      long now = System.nanoTime();
      if (l.isPresent() && l.get() == last && term == lastTerm) {
        if (now - since >= TimeUnit.SECONDS.toNanos(1)) {
          return last;
        }
      } else {
        last = l.orElse(-1);
        lastTerm = term;
        since = now;
      }
      Thread.sleep(100);
    }
    return -1;
  }

  /**
   * Waits until every node runs and reports the same applied index within 1,000 entries, at most
   * {@code limit}.
   */
  private void awaitAllRunning(Duration limit) throws InterruptedException {
    long end = System.nanoTime() + limit.toNanos();
    while (System.nanoTime() < end) {
      long min = Long.MAX_VALUE;
      long max = Long.MIN_VALUE;
      boolean all = true;
      for (int i = 0; i < cluster.size() && all; i++) {
        Optional<StatusReply> s = cluster.isRunning(i) ? cluster.status(i) : Optional.empty();
        all = s.isPresent();
        if (all) {
          min = Math.min(min, s.get().getAppliedIndex());
          max = Math.max(max, s.get().getAppliedIndex());
        }
      }
      if (all && max - min < 1_000) {
        return;
      }
      Thread.sleep(200);
    }
    out.printf("the nodes did not all catch up within %s; going on%n", limit);
  }

  /** Acknowledgement times (nanoTime), in order of arrival. */
  private static final class Acks {
    private long[] times = new long[1 << 16];
    private int size;

    /** Notes an acknowledgement now (read under the lock, so that the times stay in order). */
    synchronized void add() {
      if (size == times.length) {
        times = java.util.Arrays.copyOf(times, size * 2);
      }
      times[size++] = System.nanoTime();
    }

    synchronized long count() {
      return size;
    }

    synchronized long countBetween(long from, long to) {
      long n = 0;
      for (int i = size - 1; i >= 0 && times[i] >= from; i--) {
        if (times[i] <= to) {
          n++;
        }
      }
      return n;
    }

    /** The first acknowledgement at or after {@code t}, or Long.MAX_VALUE. */
    synchronized long firstAfter(long t) {
      long first = Long.MAX_VALUE;
      for (int i = size - 1; i >= 0 && times[i] >= t; i--) {
        first = times[i];
      }
      return first;
    }

    /**
     * The longest time between consecutive acknowledgements in [from, to], counting from the last
     * one before {@code from} (or {@code from}) to the first one inside, and from the last one
     * inside to {@code to}.
     */
    synchronized long longestGap(long from, long to) {
      int i = size - 1;
      while (i >= 0 && times[i] >= from) {
        i--;
      }
      long prev = i >= 0 ? Math.max(times[i], from) : from;
      long gap = 0;
      for (int j = i + 1; j < size && times[j] <= to; j++) {
        gap = Math.max(gap, times[j] - prev);
        prev = times[j];
      }
      return Math.max(gap, to - prev);
    }
  }
}
