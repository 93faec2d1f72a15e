package io.idem.server;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

/**
 * When each replica writes the snapshot that every replica froze at the same log index: one after
 * the other, followers first in id order and the leader last, a slot apart.
 *
 * <p>Every replica freezes its state at the same indexes (the multiples of the snapshot interval),
 * so that their digests can be compared. Written at once, the snapshots made every node slow at the
 * same moment, and a commit needs the leader and one follower: under the keys bench on this
 * machine, each snapshot cut the throughput by four fifths for 3-5 seconds (docs/PERFORMANCE.md,
 * tenth sitting). Written in turn, one follower at a time is busy and the other one still acks, and
 * the leader, whose own write slows every commit, writes when the followers are done.
 *
 * <p>A slot is a little longer than this node's last write (bounded), so the writes of a cluster
 * whose snapshots are small follow each other closely. The order is node-local timing only: it
 * decides nothing in the replicated state (docs/ARCHITECTURE.md, "Determinism rules").
 */
final class SnapshotStagger {
  /** The slot before this node has written a snapshot. */
  static final Duration FIRST_SLOT = Duration.ofSeconds(1);

  /** Bounds of a slot. */
  static final Duration MIN_SLOT = Duration.ofMillis(50);

  static final Duration MAX_SLOT = Duration.ofSeconds(30);

  private volatile Duration slot = FIRST_SLOT;

  /**
   * This node's place in the order: 0 writes at once, 1 a slot later, and so on.
   *
   * @param self this node's id
   * @param peers the ids of the voting members of the current configuration
   * @param leader the leader's id, or null if none is known: then every node goes in id order
   */
  static int position(String self, Collection<String> peers, String leader) {
    List<String> order = new ArrayList<>(peers.size());
    peers.stream().filter(p -> !p.equals(leader)).sorted().forEach(order::add);
    if (leader != null && peers.contains(leader)) {
      order.add(leader);
    }
    int i = order.indexOf(self);
    return Math.max(i, 0); // not a voting member: no one waits for it
  }

  /** How long a node at {@code position} waits before it writes. */
  Duration delay(int position) {
    return slot.multipliedBy(position);
  }

  /** Notes how long this node's last write took: the next slot is a quarter longer. */
  void wrote(Duration took) {
    Duration next = took.plus(took.dividedBy(4));
    if (next.compareTo(MIN_SLOT) < 0) {
      next = MIN_SLOT;
    } else if (next.compareTo(MAX_SLOT) > 0) {
      next = MAX_SLOT;
    }
    slot = next;
  }
}
