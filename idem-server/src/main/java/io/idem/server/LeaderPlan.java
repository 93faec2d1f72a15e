package io.idem.server;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Which node should lead each group of a cluster of several groups, from the groups' voters alone,
 * so that every node that computes it from the same view gets the same answer and leaders do not
 * bounce between nodes. The current leaders play no part.
 *
 * <ol>
 *   <li>A group with a voter of Ratis priority above 0 goes to its highest such voter (the lowest
 *       id among equals). Ratis hands a group to such a member on its own when it is caught up, so
 *       any other choice would fight it. A cluster's first start gives one member of each group
 *       priority 1 ({@link RaftHost#preferredLeader}); members added later get 0.
 *   <li>Every other data group, in increasing number, goes to the voter that leads the fewest data
 *       groups so far, ties to the first voter at or after position {@code (g - 1) mod N} in the
 *       voters of every group sorted by id (N of them), as at the first start.
 *   <li>The metadata group, if it has no such voter, goes last to the voter that leads the fewest
 *       data groups. It is not counted: it carries no writes.
 * </ol>
 *
 * <p>So a cluster grown from 3 to 5 nodes, whose moved groups lost their priority member, gives the
 * new nodes those groups' leadership ({@code idem group move}, docs/OPERATIONS.md).
 */
final class LeaderPlan {
  private LeaderPlan() {}

  /**
   * A group's voters as one of its members sees them.
   *
   * @param group the group number (0: metadata)
   * @param priority each voter's Ratis priority, by id
   */
  record Voters(int group, Map<String, Integer> priority) {
    Voters {
      if (priority.isEmpty()) {
        throw new IllegalArgumentException("group " + group + " has no voters");
      }
      priority = Map.copyOf(priority);
    }

    /** The voter Ratis prefers (highest priority above 0, lowest id among equals), or null. */
    String pinned() {
      String best = null;
      int top = 0;
      for (String id : new TreeSet<>(priority.keySet())) {
        int p = priority.get(id);
        if (p > top) {
          top = p;
          best = id;
        }
      }
      return best;
    }
  }

  /** The planned leader of each group in {@code all} (one entry per group number). */
  static Map<Integer, String> plan(Collection<Voters> all) {
    Map<Integer, Voters> byGroup = new TreeMap<>();
    for (Voters v : all) {
      if (byGroup.put(v.group(), v) != null) {
        throw new IllegalArgumentException("group " + v.group() + " is given twice");
      }
    }
    List<String> nodes = new ArrayList<>(voterIds(byGroup.values()));
    Map<Integer, String> plan = new TreeMap<>();
    Map<String, Integer> load = new HashMap<>();
    for (Voters v : byGroup.values()) {
      String pinned = v.pinned();
      if (pinned != null) {
        plan.put(v.group(), pinned);
        if (v.group() > 0) {
          load.merge(pinned, 1, Integer::sum);
        }
      }
    }
    for (Voters v : byGroup.values()) {
      if (v.group() > 0 && !plan.containsKey(v.group())) {
        String chosen = leastLoaded(v, nodes, load, v.group() - 1);
        plan.put(v.group(), chosen);
        load.merge(chosen, 1, Integer::sum);
      }
    }
    Voters meta = byGroup.get(0);
    if (meta != null && !plan.containsKey(0)) {
      plan.put(0, leastLoaded(meta, nodes, load, 0));
    }
    return plan;
  }

  private static String leastLoaded(
      Voters v, List<String> nodes, Map<String, Integer> load, int start) {
    int n = nodes.size();
    int from = Math.floorMod(start, n);
    return v.priority().keySet().stream()
        .min(
            Comparator.<String>comparingInt(id -> load.getOrDefault(id, 0))
                .thenComparingInt(id -> Math.floorMod(nodes.indexOf(id) - from, n)))
        .orElseThrow();
  }

  /** Every voter's id, sorted. */
  private static java.util.SortedSet<String> voterIds(Collection<Voters> all) {
    java.util.SortedSet<String> ids = new TreeSet<>();
    all.forEach(v -> ids.addAll(v.priority().keySet()));
    return ids;
  }
}
