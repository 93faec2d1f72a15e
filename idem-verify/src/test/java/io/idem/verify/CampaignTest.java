package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ci profile ({@code idem verify --profile ci}): a campaign against three real server processes
 * behind fault proxies, with every kind of fault in each round (SIGKILL, SIGSTOP, lost responses,
 * connection resets, delays, a client process killed and resumed, a wiped leader, a node wiped and
 * replaced under a new id, and partitions between the servers: an isolated leader, a
 * majority/minority split, a bridge, a one-way partition, a half-open peer link), no violations
 * while a greedy client floods the cluster and is refused at its quotas; and, as a test of its own
 * so that a failure of the first does not hide it, the negative control (at-least-once retries)
 * under faults, which the checkers must catch.
 */
@Tag("slow")
@Timeout(300)
class CampaignTest {
  @TempDir Path dir;

  /** The campaign's seed: {@code -Didem.verify.seed=N} replays a run. */
  static long seed(String campaign) {
    long seed = Long.getLong("idem.verify.seed", System.nanoTime());
    System.out.println(campaign + " seed " + seed + "; replay with -Didem.verify.seed=" + seed);
    return seed;
  }

  @Test
  void exactlyOnceSurvivesEveryFault() throws Exception {
    Path run = dir.resolve("exactly-once");
    // With TLS and access control on: every operation is checked against the clients' role, and
    // the Raft port admits the named members only, under the same faults.
    Campaign.Report ok =
        Campaign.run(run, Campaign.Settings.ci(seed("campaign"), false).secured(true));
    System.out.println("campaign " + ok);
    System.out.println("campaign greedy client: " + ok.greedy());
    assertThat(ok.violations()).isEmpty();
    assertThat(ok.undecidedRegisters()).as("registers the search gave up on").isEmpty();
    assertThat(ok.opsByKind().get(Op.Fn.CAS)).isPositive();
    assertThat(ok.faults().values().stream().mapToLong(Long::longValue).sum()).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.APPEND)).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.INCR)).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.GRANT)).isPositive();
    // The greedy client (CN=greedy, a role of small quotas) really pressed on its quotas, and was
    // refused at them, while the checked clients above passed.
    assertThat(ok.greedy().quotaRefusals()).as("greedy client: %s", ok.greedy()).isPositive();
    // Every kind of fault came at least once (a shuffled round of the 15 kinds takes 60-90 s on a
    // quiet machine; the
    // profile runs 150 s).
    assertThat(ok.faults().keySet())
        .anyMatch(k -> k.startsWith("kill -9 ") && !k.contains("client"))
        .anyMatch(k -> k.startsWith("SIGSTOP"))
        .contains("responses lost", "connections reset", "client traffic delayed")
        .contains("kill -9 client process")
        .anyMatch(k -> k.startsWith("wipe leader") && k.contains("(rejoined"))
        .contains("replace node (wiped, rejoined as a new member)")
        .noneMatch(k -> k.startsWith("replace node failed"))
        .anyMatch(k -> k.startsWith("partition: leader isolated with a minority"))
        .anyMatch(k -> k.startsWith("partition: majority/minority, leader in the majority"))
        .anyMatch(k -> k.startsWith("partition: bridge"))
        .anyMatch(k -> k.startsWith("one-way partition"))
        .anyMatch(k -> k.startsWith("half-open peer link"));
    // The faults are on disk too, as they came, for a run whose judging fails.
    assertThat(Campaign.recordedFaults(run)).isEqualTo(ok.faults());
    List<Op> recorded = History.read(ok.history());
    assertThat(recorded)
        .as("acknowledged appends of the client process")
        .anyMatch(o -> o.process().startsWith("w") && o.outcome() == Op.Outcome.OK);
    assertThat(recorded)
        .hasSize(
            Math.toIntExact(ok.opsByKind().values().stream().mapToLong(Long::longValue).sum()));
    // Offline, the recorded run judges the same; with one element appended twice, it does not.
    assertThat(Campaign.check(run, new ArrayList<>())).isEmpty();
    History.FinalState end = History.readFinalState(run.resolve("final-state.json"));
    List<Long> list = new ArrayList<>(end.lists().get("list/0"));
    list.add(list.get(0));
    Map<String, List<Long>> lists = new HashMap<>(end.lists());
    lists.put("list/0", list);
    History.writeFinalState(
        run.resolve("final-state.json"), new History.FinalState(lists, end.counters()));
    assertThat(Campaign.check(run, new ArrayList<>()))
        .extracting(Violation::kind)
        .containsExactly(Violation.Kind.DUPLICATE);
  }

  /**
   * The negative control: calls that time out (300 ms) are sent again as new calls. The first copy
   * stays in its session and is applied too, and the checkers must say so.
   */
  @Test
  void atLeastOnceRetriesAreCaught() throws Exception {
    Campaign.Report control =
        Campaign.run(
            dir.resolve("at-least-once"), Campaign.Settings.ci(seed("negative control"), true));
    System.out.println("negative control " + control);
    System.out.println("negative control greedy client: " + control.greedy());
    assertThat(control.violations())
        .extracting(Violation::kind)
        .contains(Violation.Kind.DUPLICATE)
        .doesNotContain(Violation.Kind.DIVERGENCE);
    // The greedy client, anonymous like the others here, was refused at the lowered defaults.
    assertThat(control.greedy().quotaRefusals())
        .as("greedy client: %s", control.greedy())
        .isPositive();
  }
}
