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
 * next fault waits for it) and {@link Kind#STOP} (SIGSTOP, SIGCONT after {@link Settings#pause()}).
 * Isolating the leader from its peers while clients still reach it needs proxies on the peer links,
 * which {@link ProcessCluster} does not have yet.
 *
 * <p>Not a test: a measurement, with its figures in docs/PERFORMANCE.md.
 */
public final class FailoverBench {

  /** The fault injected on the leader. */
  public enum Kind {
    KILL,
    STOP
  }

  /** How long the acknowledgements must flow again before a fault counts as recovered. */
  static final Duration SETTLED = Duration.ofSeconds(2);

  /** How long before the fault the measured window starts. */
  static final Duration BEFORE = Duration.ofSeconds(1);

  /** The most one fault may take to recover before the run gives up. */
  static final Duration RECOVERY_LIMIT = Duration.ofSeconds(60);

  /**
   * What to run.
   *
   * @param kind the fault
   * @param faults how many
   * @param rate increments per second, paced
   * @param pause how long a SIGSTOP lasts
   */
  public record Settings(Kind kind, int faults, int rate, Duration pause) {
    public Settings {
      if (faults < 1 || rate < 1 || pause.isNegative()) {
        throw new IllegalArgumentException(
            "faults and rate must be positive, got " + faults + " and " + rate);
      }
    }
  }

  /**
   * The outcome.
   *
   * @param gapsMs the longest acknowledgement gap around each fault, in fault order
   * @param acks acknowledgements in the whole run
   * @param failures calls that failed
   */
  public record Report(List<Long> gapsMs, long acks, long failures) {
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
    try (IdemClient client =
        IdemClient.builder()
            .servers(cluster.clientAddresses())
            .requestTimeout(Duration.ofSeconds(60))
            .build()) {
      Thread load = new Thread(() -> load(client), "failover-load");
      load.setDaemon(true);
      load.start();
      try {
        awaitFlow(System.nanoTime(), Duration.ofSeconds(60));
        for (int k = 1; k <= settings.faults(); k++) {
          int leader = stableLeader(Duration.ofSeconds(60));
          long faultAt = System.nanoTime();
          inject(leader);
          long recovered = awaitFlow(faultAt, RECOVERY_LIMIT);
          long gap = acks.longestGap(faultAt - BEFORE.toNanos(), recovered);
          gaps.add(TimeUnit.NANOSECONDS.toMillis(gap));
          out.printf(
              "fault %d/%d %s of %s: longest gap %d ms%n",
              k, settings.faults(), settings.kind(), cluster.id(leader), gaps.get(k - 1));
          out.flush();
          if (!cluster.isRunning(leader)) {
            cluster.start(leader);
          }
          awaitAllRunning(Duration.ofSeconds(60));
        }
      } finally {
        load.interrupt();
        load.join(5_000);
      }
    }
    return new Report(gaps, acks.count(), failures.get());
  }

  private void inject(int leader) throws InterruptedException {
    switch (settings.kind()) {
      case KILL -> cluster.kill(leader);
      case STOP -> {
        cluster.pause(leader);
        Thread.sleep(settings.pause().toMillis());
        cluster.resume(leader);
      }
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
                  } else {
                    failures.incrementAndGet();
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
    throw new IllegalStateException("the load did not flow again within " + limit);
  }

  /** Waits for a leader that held its term for a second; returns its index. */
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
    throw new IllegalStateException("no stable leader within " + limit);
  }

  /** Waits until every node runs and reports the same applied index within 1,000 entries. */
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
    throw new IllegalStateException("a node did not catch up within " + limit);
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
