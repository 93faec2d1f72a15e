package io.idem.verify;

import io.idem.client.IdemClient;
import io.idem.proto.StatusReply;
import io.idem.testkit.Eventually;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The campaign's view of its {@link ProcessCluster}: clients of it, the waits for a leader and for
 * a node to catch up (bounded polling with {@link Eventually}), and, at the end, the replicas'
 * convergence check.
 */
final class ClusterWatch {
  /**
   * How often the waits ask: each poll is a Status call to a node, a new channel when the node is
   * down or starting, on a machine the campaign loads.
   */
  private static final Duration POLL = Duration.ofMillis(100);

  private final ProcessCluster cluster;
  private final int window;

  /**
   * A watch on {@code cluster}.
   *
   * @param window the calls each workload client keeps in flight (its clients allow twice as many,
   *     at least 8)
   */
  ClusterWatch(ProcessCluster cluster, int window) {
    this.cluster = cluster;
    this.window = window;
  }

  /**
   * A client of every node (through the client proxies), with calls timing out after {@code
   * timeout}.
   */
  IdemClient client(Duration timeout) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .requestTimeout(timeout)
        .stallTimeout(Duration.ofSeconds(2))
        .window(Math.max(8, 2 * window))
        .tls(cluster.clientTls())
        .build();
  }

  /**
   * Waits until a node says it leads.
   *
   * @throws IllegalStateException if none does within {@code timeout}
   */
  void awaitLeader(Duration timeout) throws InterruptedException {
    if (leaderWithin(timeout).isEmpty()) {
      throw new IllegalStateException("no leader within " + timeout);
    }
  }

  /** The node that says it leads, once one does; empty if none did within {@code timeout}. */
  Optional<Integer> leaderWithin(Duration timeout) throws InterruptedException {
    return Eventually.within(timeout, POLL, () -> cluster.leader().orElse(null));
  }

  /** The node that says it leads group {@code group}, once one does; empty if none did. */
  Optional<Integer> leaderWithin(int group, Duration timeout) throws InterruptedException {
    return Eventually.within(timeout, POLL, () -> cluster.leader(group).orElse(null));
  }

  /**
   * Node {@code i}'s status once it applied {@code index}; empty if it did not within {@code
   * timeout}.
   */
  Optional<StatusReply> appliedWithin(int i, long index, Duration timeout)
      throws InterruptedException {
    return appliedWithin(i, -1, index, timeout);
  }

  /**
   * Node {@code i}'s status in group {@code group} (-1: none named) once it applied {@code index}
   * there; empty if it did not within {@code timeout}.
   */
  Optional<StatusReply> appliedWithin(int i, int group, long index, Duration timeout)
      throws InterruptedException {
    return Eventually.within(
        timeout,
        POLL,
        () -> cluster.status(i, group).filter(s -> s.getAppliedIndex() >= index).orElse(null));
  }

  /**
   * Waits until every node reported its state digest at a common snapshot index (the Status reply's
   * digest_index: replicas snapshot at the same multiples of the snapshot interval), and records a
   * divergence if the digests there differ; returns the duplicates the leader suppressed.
   */
  long convergence(List<Violation> violations) throws InterruptedException {
    int groups = cluster.groups();
    if (groups == 1) {
      return convergence(violations, -1);
    }
    // Every data group's replicas (the metadata group holds only the clients' sessions, and its
    // log advances by ticks alone, too slowly to reach a common snapshot index here).
    long duplicates = 0;
    for (int g = 1; g <= groups; g++) {
      duplicates += convergence(violations, g);
    }
    return duplicates;
  }

  /** {@link #convergence(List)} of group {@code group} (-1: a cluster of one group). */
  private long convergence(List<Violation> violations, int group) throws InterruptedException {
    Duration timeout = Duration.ofSeconds(60);
    // A node skips a snapshot index while its writer still writes the one before (under load), so
    // the replicas' last snapshots may sit at different indexes when the run ends, and an idle
    // log advances by a tick every 500 ms only. One-at-a-time writes here take the log across the
    // next multiples, where every node, idle now, snapshots.
    try (IdemClient nudger = client(Duration.ofSeconds(10))) {
      Digests digests = new Digests(nudger, System.nanoTime() + timeout.toNanos(), group);
      // No pause between polls: the nudges pace them.
      Optional<Long> common = Eventually.within(timeout, Duration.ZERO, digests::commonOrNudge);
      if (common.isEmpty()) {
        violations.add(
            new Violation(
                Violation.Kind.DIVERGENCE,
                "*",
                "the replicas"
                    + (group < 0 ? "" : " of group " + group)
                    + " reported no digest at a common snapshot index in 60 s"));
        return digests.duplicates;
      }
      long index = common.get();
      String first = digests.seen.get(0).get(index);
      for (int i = 1; i < cluster.size(); i++) {
        if (!digests.seen.get(i).get(index).equals(first)) {
          violations.add(
              new Violation(
                  Violation.Kind.DIVERGENCE,
                  "*",
                  (group < 0 ? "" : "group " + group + ": ")
                      + "at snapshot index "
                      + index
                      + " "
                      + cluster.id(i)
                      + " differs from "
                      + cluster.id(0)));
        }
      }
      return digests.duplicates;
    }
  }

  /** A key of data group {@code group} of {@code groups}, for the nudges. */
  static String nudgeKeyOf(int group, int groups) {
    for (int k = 0; ; k++) {
      String key = "convergence/nudge-" + k;
      if (io.idem.proto.Partitions.groupOf(io.idem.proto.Partitions.of(key), groups) == group) {
        return key;
      }
    }
  }

  /**
   * The digests each node reported, by snapshot index, and the duplicates the leader suppressed, as
   * the convergence check polls the nodes and nudges the log along.
   */
  private final class Digests {
    final List<Map<Long, String>> seen = new ArrayList<>();
    long duplicates;
    private final IdemClient nudger;
    private final long deadline;
    private long nudges;

    private final int group;
    private final String nudgeKey;

    Digests(IdemClient nudger, long deadline, int group) {
      this.nudger = nudger;
      this.deadline = deadline;
      this.group = group;
      this.nudgeKey = group < 0 ? "convergence/nudge" : nudgeKeyOf(group, cluster.groups());
      for (int i = 0; i < cluster.size(); i++) {
        seen.add(new HashMap<>());
      }
    }

    /**
     * Asks every node's status once, and returns a snapshot index every node reported a digest at;
     * while there is none, nudges the log (up to 50 one-at-a-time writes, until the deadline) and
     * returns null.
     */
    Long commonOrNudge() {
      for (int i = 0; i < cluster.size(); i++) {
        Optional<StatusReply> s = cluster.status(i, group);
        if (s.isPresent()) {
          // The digest is the state's at the node's last snapshot (digest_index: a multiple of
          // the snapshot interval, the same indexes on every replica), not at its applied index.
          if (s.get().getDigestIndex() > 0) {
            seen.get(i).put(s.get().getDigestIndex(), s.get().getDigest());
          }
          if (s.get().getRole().equals("LEADER")) {
            duplicates = s.get().getDuplicatesSuppressed();
          }
        }
      }
      for (Long index : seen.get(0).keySet()) {
        boolean everywhere = true;
        for (int i = 1; i < cluster.size() && everywhere; i++) {
          everywhere = seen.get(i).containsKey(index);
        }
        if (everywhere) {
          return index;
        }
      }
      for (int k = 0; k < 50 && System.nanoTime() < deadline; k++) {
        try {
          nudger.put(nudgeKey, Long.toString(nudges++));
        } catch (RuntimeException e) {
          try {
            Thread.sleep(50); // a fault's aftermath: ask again
          } catch (InterruptedException ie) {
            Thread.currentThread().interrupt(); // the poll's next sleep throws it
            break;
          }
        }
      }
      return null;
    }
  }
}
