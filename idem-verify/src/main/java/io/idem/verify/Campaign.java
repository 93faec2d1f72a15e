package io.idem.verify;

import io.idem.proto.StatusReply;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

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

  private final Path dir;
  private final Settings settings;
  private final Map<String, Long> faults = new ConcurrentHashMap<>();
  private final long t0 = System.nanoTime();
  private ProcessCluster cluster;
  private ClusterWatch watch;
  private ClientProcesses processes;
  private long end;

  private Campaign(Path dir, Settings settings) {
    this.dir = dir;
    this.settings = settings;
  }

  /** Runs a campaign in {@code dir} (servers' data and logs, and the history file). */
  public static Report run(Path dir, Settings settings) throws Exception {
    return new Campaign(dir, settings).run();
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
      processes = new ClientProcesses(dir, settings, cl, t0, end);
      try (Workloads workloads = new Workloads(settings, watch, t0, end)) {
        workloads.start();
        processes.startAll();
        faults();
        workloads.join();
        cl.network().healAll();
        for (int i = 0; i < cl.size(); i++) {
          cl.resume(i);
          cl.proxy(i).passResponses();
          cl.proxy(i).delay(Duration.ZERO);
          if (!cl.isRunning(i)) {
            cl.start(i);
          }
        }
        List<Op> ops = workloads.history();
        ops.addAll(processes.awaitAll(this::count));
        watch.awaitLeader(Duration.ofSeconds(60));
        History.FinalState end = workloads.readFinalState();
        Path file = dir.resolve("history.jsonl");
        History.write(file, ops);
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
            workloads.retries(),
            duplicates,
            violations,
            undecided,
            file);
      } finally {
        processes.destroyAll();
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
        if (f != Fault.KILL_CLIENT_PROCESS || !processes.isEmpty()) {
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
        int w = r.nextInt(processes.size());
        Process p = processes.get(w);
        if (!p.isAlive()) {
          return;
        }
        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        count("kill -9 client process");
        Thread.sleep(500 + r.nextInt(1_500));
        processes.restart(w);
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
}
