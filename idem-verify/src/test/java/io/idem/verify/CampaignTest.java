package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ci profile ({@code idem verify --profile ci}): a campaign against three real server processes
 * with SIGKILL and SIGSTOP faults, no violations; then the negative control (at-least-once retries)
 * under faults, which the checkers must catch.
 */
@Timeout(300)
class CampaignTest {
  @TempDir Path dir;

  @Test
  void exactlyOnceSurvivesKillsAndPausesAndAtLeastOnceIsCaught() throws Exception {
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
    long recorded = ok.opsByKind().values().stream().mapToLong(Long::longValue).sum();
    assertThat(History.read(ok.history())).hasSize(Math.toIntExact(recorded));

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
