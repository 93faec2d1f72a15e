package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class LeaderPlanTest {
  /** Voters with priorities: "n1=1", "n2" (priority 0). */
  private static LeaderPlan.Voters group(int g, String... voters) {
    Map<String, Integer> priority = new HashMap<>();
    for (String v : voters) {
      String[] parts = v.split("=");
      priority.put(parts[0], parts.length == 1 ? 0 : Integer.parseInt(parts[1]));
    }
    return new LeaderPlan.Voters(g, priority);
  }

  /**
   * The layout of a first start on three nodes: every group pins RaftHost.preferredLeader's node.
   */
  private static List<LeaderPlan.Voters> firstStart(int groups) {
    ServerConfig config =
        ServerConfig.builder()
            .id("n1")
            .peers(
                List.of(
                    new ServerConfig.Peer("n1", "127.0.0.1:7002", "127.0.0.1:7001"),
                    new ServerConfig.Peer("n2", "127.0.0.1:7012", "127.0.0.1:7011"),
                    new ServerConfig.Peer("n3", "127.0.0.1:7022", "127.0.0.1:7021")))
            .groups(groups)
            .build();
    List<LeaderPlan.Voters> out = new ArrayList<>();
    for (int g = 0; g <= groups; g++) {
      String preferred = RaftHost.preferredLeader(config, g);
      Map<String, Integer> priority = new HashMap<>();
      for (String id : List.of("n1", "n2", "n3")) {
        priority.put(id, id.equals(preferred) ? 1 : 0);
      }
      out.add(new LeaderPlan.Voters(g, priority));
    }
    return out;
  }

  @Test
  void aFirstStartsLayoutIsPlannedAsItsPriorities() {
    Map<Integer, String> plan = LeaderPlan.plan(firstStart(8));
    assertThat(plan)
        .containsEntry(0, "n1")
        .containsEntry(1, "n1")
        .containsEntry(2, "n2")
        .containsEntry(3, "n3")
        .containsEntry(4, "n1")
        .containsEntry(8, "n2")
        .hasSize(9);
  }

  @Test
  void groupsThatLostTheirPriorityMemberGoToTheNewNodes() {
    // 3 -> 5 by the recipe in docs/OPERATIONS.md: groups 3 and 6 move from n3 to n4, groups 4 and
    // 7 from n1 to n5, each away from the member it pinned.
    List<LeaderPlan.Voters> grown =
        List.of(
            group(0, "n1=1", "n2", "n3", "n4", "n5"),
            group(1, "n1=1", "n2", "n3"),
            group(2, "n1", "n2=1", "n3"),
            group(3, "n1", "n2", "n4"),
            group(4, "n2", "n3", "n5"),
            group(5, "n1", "n2=1", "n3"),
            group(6, "n1", "n2", "n4"),
            group(7, "n2", "n3", "n5"),
            group(8, "n1", "n2=1", "n3"));
    Map<Integer, String> plan = LeaderPlan.plan(grown);
    // Pinned: n1 leads 1, n2 leads 2, 5 and 8. The free groups in turn go to a voter leading the
    // fewest: 3 to n4; 4 to n5 (n3 and n5 lead none; n5 is first from position 3); 6 to n1 (n1 and
    // n4 lead one; n1 is first from position 0); 7 to n3.
    assertThat(plan)
        .containsEntry(0, "n1")
        .containsEntry(3, "n4")
        .containsEntry(4, "n5")
        .containsEntry(6, "n1")
        .containsEntry(7, "n3")
        .hasSize(9);
    Map<String, Integer> leads = new HashMap<>();
    plan.forEach((g, id) -> leads.merge(id, g == 0 ? 0 : 1, Integer::sum));
    assertThat(leads)
        .containsEntry("n1", 2)
        .containsEntry("n2", 3)
        .containsEntry("n3", 1)
        .containsEntry("n4", 1)
        .containsEntry("n5", 1);
  }

  @Test
  void unpinnedGroupsSpreadEvenlyAndTheMetadataGroupIsNotCounted() {
    List<LeaderPlan.Voters> free = new ArrayList<>();
    free.add(group(0, "a", "b", "c", "d"));
    for (int g = 1; g <= 10; g++) {
      free.add(group(g, "a", "b", "c", "d"));
    }
    Map<Integer, String> plan = LeaderPlan.plan(free);
    Map<String, Integer> leads = new HashMap<>();
    plan.forEach((g, id) -> leads.merge(id, g == 0 ? 0 : 1, Integer::sum));
    assertThat(leads.values()).allSatisfy(n -> assertThat(n).isBetween(2, 3));
    assertThat(plan.get(1)).isEqualTo("a");
    assertThat(plan.get(2)).isEqualTo("b");
    // The metadata group goes to a node with the fewest data groups (c or d lead 2 of 10).
    assertThat(plan.get(0)).isIn("c", "d");
    assertThat(leads.get(plan.get(0))).isEqualTo(2);
  }

  @Test
  void thePlanDependsOnTheVotersOnlyNotOnTheOrderTheyAreGivenIn() {
    List<LeaderPlan.Voters> layout =
        new ArrayList<>(
            List.of(
                group(0, "n1", "n2", "n3", "n4"),
                group(1, "n1", "n2", "n4"),
                group(2, "n2", "n3", "n4"),
                group(3, "n1=2", "n3=2", "n4=1"),
                group(4, "n1", "n3", "n4"),
                group(5, "n1", "n2", "n3")));
    Map<Integer, String> first = LeaderPlan.plan(layout);
    // Of equal top priorities, the lowest id.
    assertThat(first.get(3)).isEqualTo("n1");
    Random random = new Random(7);
    for (int i = 0; i < 20; i++) {
      Collections.shuffle(layout, random);
      assertThat(LeaderPlan.plan(layout)).isEqualTo(first);
    }
    assertThat(first).hasSize(6);
    for (int g = 0; g <= 5; g++) {
      String leader = first.get(g);
      int group = g;
      assertThat(layout.stream().filter(v -> v.group() == group).findFirst().orElseThrow())
          .satisfies(v -> assertThat(v.priority()).containsKey(leader));
    }
  }

  @Test
  void badViewsAreRefused() {
    assertThatThrownBy(() -> new LeaderPlan.Voters(2, Map.of()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("group 2 has no voters");
    assertThatThrownBy(() -> LeaderPlan.plan(List.of(group(1, "a"), group(1, "b"))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("group 1 is given twice");
  }
}
