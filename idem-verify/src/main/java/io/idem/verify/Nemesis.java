package io.idem.verify;

import io.idem.proto.StatusReply;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * The campaign's faults: a seeded schedule of rounds, each every {@link Fault} kind in a shuffled
 * order, and the injection of each kind: on the nodes (SIGKILL, SIGSTOP, a wiped leader, a node
 * replaced under a new id), on the client proxies (lost responses, connection resets, delays), on
 * the client processes, and between the servers ({@link PeerFaults}). Each fault injected is
 * counted under a label saying what it did (the report's faults by kind).
 */
final class Nemesis {
  /** The shortest run of a cluster of several groups that has the node replacement among faults. */
  static final java.time.Duration REPLACE_WITH_GROUPS_FROM = java.time.Duration.ofMinutes(3);

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

  private final Campaign.Settings settings;
  private final ProcessCluster cluster;
  private final ClusterWatch watch;
  private final ClientProcesses processes;
  private final long end;
  private final Path faultsFile;
  private final long t0 = System.nanoTime();
  private final Map<String, Long> faults = new ConcurrentHashMap<>();

  /**
   * A schedule seeded by the settings.
   *
   * @param end when the schedule stops (System.nanoTime)
   * @param faultsFile where each fault is appended as it comes ({@link Campaign#FAULTS_FILE})
   */
  Nemesis(
      Campaign.Settings settings,
      ProcessCluster cluster,
      ClusterWatch watch,
      ClientProcesses processes,
      long end,
      Path faultsFile) {
    this.settings = settings;
    this.cluster = cluster;
    this.watch = watch;
    this.processes = processes;
    this.end = end;
    this.faultsFile = faultsFile;
  }

  /** The seeded fault schedule, until the end: rounds of every kind, in a shuffled order. */
  void run() throws InterruptedException {
    Random r = new Random(settings.seed());
    List<Fault> kinds = new ArrayList<>();
    if (settings.atLeastOnce()) {
      // The negative control hits the leader: that leaves calls applied but unanswered.
      kinds.addAll(List.of(Fault.KILL_LEADER, Fault.PAUSE_LEADER, Fault.LOSE_RESPONSES));
    } else {
      for (Fault f : Fault.values()) {
        // In a cluster of several groups the replacement moves every group's replica to the new
        // node in turn (idem group move), then restarts every member: with 8 groups on this
        // machine it took 40 s of a 60 s run and left room for no other fault, so a run shorter
        // than REPLACE_WITH_GROUPS_FROM leaves it out.
        if ((f != Fault.KILL_CLIENT_PROCESS || !processes.isEmpty())
            && (f != Fault.REPLACE_NODE
                || settings.groups() == 1
                || settings.duration().compareTo(REPLACE_WITH_GROUPS_FROM) >= 0)) {
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
        if (rounds == 1 && round.remove(Fault.REPLACE_NODE)) {
          // The longest kind (it restarts every member) first, so that the pauses of the first
          // round shrink to fit it and the kinds after it, not after it is due at the end.
          round.add(Fault.REPLACE_NODE);
        }
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
          count(
              settings.groups() == 1
                  ? "replace node (wiped, rejoined as a new member)"
                  : "replace node (wiped, every group moved to a new member)");
        } catch (RuntimeException e) {
          count("replace node failed: " + e.getMessage());
          return;
        }
        try {
          // The members restart one by one onto the peer links, so that later partitions cut
          // the new member's traffic too.
          cluster.relink(Duration.ofSeconds(60));
        } catch (RuntimeException e) {
          count("relink after the replacement incomplete: " + e.getMessage());
        }
      }
      case ISOLATE_LEADER, SPLIT_MAJORITY, BRIDGE, ONE_WAY, HALF_OPEN_PEER_LINK ->
          count(new PeerFaults(cluster).inject(PeerFaults.Kind.valueOf(fault.name()), r));
    }
  }

  /**
   * The node a wipe hits: the known leader, else the one elected within 10 s (an election is under
   * way: the previous fault hit the leader); empty, and the skip counted, if none.
   */
  private Optional<Integer> wipeVictim(Optional<Integer> known) throws InterruptedException {
    Optional<Integer> leader =
        known.isPresent() ? known : watch.leaderWithin(Duration.ofSeconds(10));
    if (leader.isEmpty()) {
      count("wipe leader (skipped: no leader for 10 s)");
    }
    return leader;
  }

  /**
   * Kills the leader, deletes its data, and restarts the others one at a time (so that some node
   * always answers Status: a client built while none does, a client process restarted meanwhile,
   * takes a grouped cluster for one of a single group). Once every group elected a leader without
   * it, the wiped node starts empty and must catch up in every group within 60 s, by snapshot
   * install when the leader's log was purged.
   *
   * <p>The restarts are what makes the wipe safe and its rejoin possible. A leader that was elected
   * before the wipe keeps its old match index for the wiped node and probes the empty node from
   * there for good instead of installing a snapshot (Ratis {@code
   * LogAppenderBase.getNextIndexForInconsistency}). The node hit may not be the only one that
   * leads: in a grouped cluster it follows in other groups, and in any cluster the node that says
   * LEADER may be a deposed leader that has not heard the new term yet (after a partition heals),
   * while the real leader stays. A leader elected after the restarts holds every committed entry
   * and sees the wiped node afresh, and the empty node, which voted in none of its terms, cannot
   * vote twice in one.
   */
  private void wipe(Optional<Integer> known) throws InterruptedException {
    Optional<Integer> leader = wipeVictim(known);
    if (leader.isEmpty()) {
      return;
    }
    int victim = leader.get();
    List<Integer> others = new ArrayList<>();
    for (int i = 0; i < cluster.size(); i++) {
      if (i != victim && cluster.isRunning(i)) {
        others.add(i);
      }
    }
    cluster.wipe(victim);
    for (int i : others) {
      cluster.kill(i);
      cluster.start(i);
      cluster.awaitAnswering(i, Duration.ofSeconds(180));
    }
    List<Integer> groups = new ArrayList<>();
    if (cluster.groups() == 1) {
      groups.add(-1);
    } else {
      for (int g = 0; g <= cluster.groups(); g++) {
        groups.add(g);
      }
    }
    for (int g : groups) {
      if (watch.leaderWithin(g, Duration.ofSeconds(60)).isEmpty()) {
        throw new IllegalStateException(
            (g < 0 ? "no leader" : "group " + g + " elected no leader")
                + " among the other nodes 60 s after wiping "
                + cluster.id(victim)
                + ": the campaign cannot go on safely");
      }
    }
    cluster.start(victim);
    boolean installed = false;
    for (int g : groups) {
      long target =
          watch
              .leaderWithin(g, Duration.ofSeconds(10))
              .flatMap(l -> cluster.status(l, g))
              .map(StatusReply::getAppliedIndex)
              .orElse(0L);
      Optional<StatusReply> s = watch.appliedWithin(victim, g, target, Duration.ofSeconds(60));
      if (s.isEmpty()) {
        count(
            "wipe leader, every node restarted ("
                + (g < 0 ? "" : "group " + g + " ")
                + "not caught up in 60 s)");
        return;
      }
      installed |= s.get().getLogStartIndex() > 1;
    }
    count(
        installed
            ? "wipe leader, every node restarted (rejoined by snapshot install)"
            : "wipe leader, every node restarted (rejoined by log replay)");
  }

  /** Counts one fault (or event) under {@code label}. */
  void count(String label) {
    faults.merge(label, 1L, Long::sum);
    // Also on disk as it happens (seconds into the schedule, then the fault), so that the faults
    // of a run whose judging failed (a long run's checker once ran out of heap) are still known.
    String line = String.format(Locale.ROOT, "%.3f\t%s%n", (System.nanoTime() - t0) / 1e9, label);
    synchronized (faults) {
      try {
        Files.writeString(
            faultsFile,
            line,
            StandardCharsets.UTF_8,
            StandardOpenOption.CREATE,
            StandardOpenOption.APPEND);
      } catch (IOException e) {
        throw new UncheckedIOException("cannot record a fault in " + faultsFile, e);
      }
    }
  }

  /** The faults counted so far, by label. */
  Map<String, Long> counts() {
    return new TreeMap<>(faults);
  }

  /**
   * Ends every fault still in force: heals the peer links, resumes every node and restarts the ones
   * that are down, and lets the client proxies pass responses again without delay.
   */
  void healAll() {
    cluster.network().healAll();
    for (int i = 0; i < cluster.size(); i++) {
      cluster.resume(i);
      cluster.proxy(i).passResponses();
      cluster.proxy(i).delay(Duration.ZERO);
      if (!cluster.isRunning(i)) {
        cluster.start(i);
      }
    }
  }
}
