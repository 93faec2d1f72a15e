package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ci profile ({@code idem verify --profile ci}): a campaign against three real server processes
 * behind fault proxies, with every kind of fault in each round (SIGKILL, SIGSTOP, lost responses,
 * connection resets, delays, a client process killed and resumed, a wiped leader), no violations;
 * then the negative control (at-least-once retries) under faults, which the checkers must catch.
 */
@Timeout(300)
class CampaignTest {
  @TempDir Path dir;

  @Test
  void exactlyOnceSurvivesEveryFaultAndAtLeastOnceIsCaught() throws Exception {
    long seed = Long.getLong("idem.verify.seed", System.nanoTime());
    Campaign.Report ok =
        Campaign.run(dir.resolve("exactly-once"), Campaign.Settings.ci(seed, false));
    System.out.println("campaign " + ok);
    assertThat(ok.violations()).isEmpty();
    assertThat(ok.undecidedRegisters()).as("registers the search gave up on").isEmpty();
    assertThat(ok.opsByKind().get(Op.Fn.CAS)).isPositive();
    assertThat(ok.faults().values().stream().mapToLong(Long::longValue).sum()).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.APPEND)).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.INCR)).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.GRANT)).isPositive();
    // Every kind of fault came at least once (a shuffled round of the 9 kinds takes ~30 s).
    assertThat(ok.faults().keySet())
        .anyMatch(k -> k.startsWith("kill -9 ") && !k.contains("client"))
        .anyMatch(k -> k.startsWith("SIGSTOP"))
        .contains("responses lost", "connections reset", "client traffic delayed")
        .contains("kill -9 client process")
        .anyMatch(k -> k.startsWith("wipe leader (rejoined"));
    java.util.List<Op> recorded = History.read(ok.history());
    assertThat(recorded)
        .as("acknowledged appends of the client process")
        .anyMatch(o -> o.process().startsWith("w") && o.outcome() == Op.Outcome.OK);
    assertThat(recorded)
        .hasSize(
            Math.toIntExact(ok.opsByKind().values().stream().mapToLong(Long::longValue).sum()));
    // Offline, the recorded run judges the same; with one element appended twice, it does not.
    Path run = dir.resolve("exactly-once");
    assertThat(Campaign.check(run, new java.util.ArrayList<>())).isEmpty();
    History.FinalState end = History.readFinalState(run.resolve("final-state.json"));
    java.util.List<Long> list = new java.util.ArrayList<>(end.lists().get("list/0"));
    list.add(list.get(0));
    java.util.Map<String, java.util.List<Long>> lists = new java.util.HashMap<>(end.lists());
    lists.put("list/0", list);
    History.writeFinalState(
        run.resolve("final-state.json"), new History.FinalState(lists, end.counters()));
    assertThat(Campaign.check(run, new java.util.ArrayList<>()))
        .extracting(Violation::kind)
        .containsExactly(Violation.Kind.DUPLICATE);

    // The negative control: calls that time out (300 ms) are sent again as new calls. The first
    // copy stays in its session and is applied too, and the checkers must say so.
    Campaign.Report control =
        Campaign.run(dir.resolve("at-least-once"), Campaign.Settings.ci(seed, true));
    System.out.println("negative control " + control);
    assertThat(control.violations())
        .extracting(Violation::kind)
        .contains(Violation.Kind.DUPLICATE)
        .doesNotContain(Violation.Kind.DIVERGENCE);
  }
}
