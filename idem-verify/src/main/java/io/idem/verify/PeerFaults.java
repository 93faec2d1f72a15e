package io.idem.verify;

import io.idem.proto.StatusReply;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.Random;

/**
 * The campaign's faults between servers, on a {@link ProcessCluster}'s {@link PeerNetwork}: each
 * one partitions the peers for 1.2-2.4 s (past the 300-600 ms election timeout), watches what the
 * nodes do meanwhile (asking each node's status directly, not through any proxy), then heals every
 * link. The clients still reach every node through its client proxy all along.
 */
final class PeerFaults {
  /** The kinds, each a {@link Nemesis.Fault} of the same name. */
  enum Kind {
    /** The leader (with one follower, on 5 nodes) cut off from the majority, both ways. */
    ISOLATE_LEADER,
    /** A minority of followers cut off from the leader's majority, both ways. */
    SPLIT_MAJORITY,
    /** Two sides that do not see each other, and one follower that sees both. */
    BRIDGE,
    /** Messages lost in one direction between the leader and a follower, the other way works. */
    ONE_WAY,
    /** The leader's open connections to a follower go silent and stay open. */
    HALF_OPEN_PEER_LINK
  }

  private static final long HOLD_MIN_MS = 1_200;
  private static final long HOLD_SPREAD_MS = 1_200;

  private final ProcessCluster cluster;

  PeerFaults(ProcessCluster cluster) {
    this.cluster = cluster;
  }

  /**
   * Injects one fault of {@code kind}, holds it, heals it.
   *
   * @return the fault's description for the campaign's counts, with what was seen during it
   */
  String inject(Kind kind, Random r) throws InterruptedException {
    Optional<Integer> known = awaitLeader();
    long hold = HOLD_MIN_MS + r.nextInt((int) HOLD_SPREAD_MS);
    if (known.isEmpty()) {
      return "peer fault skipped: no leader for 10 s";
    }
    int n = cluster.size();
    int leader = known.get();
    long term = term(leader);
    List<Integer> followers = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      if (i != leader) {
        followers.add(i);
      }
    }
    Collections.shuffle(followers, r);
    PeerNetwork net = cluster.network();
    try {
      switch (kind) {
        case ISOLATE_LEADER -> {
          // The leader with (n - 1) / 2 - 1 followers: a minority of n.
          List<Integer> minority = new ArrayList<>(followers.subList(0, (n - 1) / 2 - 1));
          minority.add(leader);
          List<Integer> majority = followers.subList((n - 1) / 2 - 1, followers.size());
          net.partition(minority, majority);
          Seen seen = watch(hold, leader, term, majority);
          return "partition: leader isolated with a minority"
              + (seen.steppedDown && seen.newLeader
                  ? " (stepped down, new leader elected)"
                  : seen.newLeader
                      ? " (new leader elected, old one still leading at the heal)"
                      : " (no new leader in the hold time)");
        }
        case SPLIT_MAJORITY -> {
          List<Integer> minority = followers.subList(0, (n - 1) / 2);
          List<Integer> majority = new ArrayList<>(followers.subList((n - 1) / 2, n - 1));
          majority.add(leader);
          net.partition(minority, majority);
          Seen seen = watch(hold, leader, term, minority);
          return "partition: majority/minority, leader in the majority"
              + (seen.steppedDown || seen.newLeader ? " (leader changed)" : " (leader kept)");
        }
        case BRIDGE -> {
          // [leader, ...] bridge [...]: the bridge, followers.get(0), is in neither side and so
          // sees both.
          List<Integer> rest = followers.subList(1, followers.size());
          List<Integer> side = new ArrayList<>(rest.subList(0, (rest.size() - 1) / 2));
          side.add(leader);
          List<Integer> other = rest.subList((rest.size() - 1) / 2, rest.size());
          net.partition(side, other);
          Seen seen = watch(hold, leader, term, List.of());
          return "partition: bridge (a follower sees both sides)"
              + (seen.steppedDown ? " (leader changed)" : " (leader kept)");
        }
        case ONE_WAY -> {
          int follower = followers.get(0);
          boolean fromLeader = r.nextBoolean();
          net.cutOneWay(fromLeader ? leader : follower, fromLeader ? follower : leader);
          Seen seen = watch(hold, leader, term, List.of());
          return (fromLeader
                  ? "one-way partition: leader to follower lost"
                  : "one-way partition: follower to leader lost")
              + (seen.steppedDown ? " (leader changed)" : " (leader kept)");
        }
        case HALF_OPEN_PEER_LINK -> {
          int follower = followers.get(0);
          long before = net.halfOpen(leader, follower);
          watch(hold, leader, term, List.of());
          return net.accepted(leader, follower) > before
              ? "half-open peer link, leader to follower (the leader opened a new connection)"
              : "half-open peer link, leader to follower (silent until healed)";
        }
        default -> throw new IllegalArgumentException("not a peer fault: " + kind);
      }
    } finally {
      net.healAll();
    }
  }

  /** What the nodes did while a fault held. */
  private record Seen(boolean steppedDown, boolean newLeader) {}

  /**
   * Polls the nodes' status for {@code holdMs}: whether the old leader stopped leading, and whether
   * one of {@code candidates} led in a later term.
   */
  private Seen watch(long holdMs, int leader, long term, List<Integer> candidates)
      throws InterruptedException {
    long deadline = System.nanoTime() + holdMs * 1_000_000;
    boolean steppedDown = false;
    boolean newLeader = false;
    while (System.nanoTime() < deadline) {
      Optional<StatusReply> old = cluster.status(leader);
      steppedDown |= old.isPresent() && !old.get().getRole().equals("LEADER");
      for (int c : candidates) {
        Optional<StatusReply> s = cluster.status(c);
        newLeader |=
            s.isPresent() && s.get().getRole().equals("LEADER") && s.get().getTerm() > term;
      }
      Thread.sleep(200);
    }
    return new Seen(steppedDown, newLeader);
  }

  private long term(int node) {
    return cluster.status(node).map(StatusReply::getTerm).orElse(-1L);
  }

  private Optional<Integer> awaitLeader() throws InterruptedException {
    long deadline = System.nanoTime() + 10_000_000_000L;
    Optional<Integer> leader = cluster.leader();
    while (leader.isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(100);
      leader = cluster.leader();
    }
    return leader;
  }
}
