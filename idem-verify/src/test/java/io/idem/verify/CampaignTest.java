package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A short campaign against three real server processes with SIGKILL and SIGSTOP faults: no
 * violations; and the negative control (at-least-once retries) on the same faults is caught.
 */
@Timeout(300)
class CampaignTest {
  @TempDir Path dir;

  @Test
  void exactlyOnceSurvivesKillsAndPausesAndAtLeastOnceIsCaught() throws Exception {
    long seed = Long.getLong("idem.verify.seed", System.nanoTime());
    Campaign.Report ok =
        Campaign.run(
            dir.resolve("exactly-once"),
            new Campaign.Settings(
                seed, 3, Duration.ofSeconds(40), 4, 2, Duration.ofSeconds(5), false));
    System.out.println("campaign " + ok);
    assertThat(ok.violations()).isEmpty();
    assertThat(ok.faults().values().stream().mapToLong(Long::longValue).sum()).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.APPEND)).isPositive();
    assertThat(ok.opsByKind().get(Op.Fn.INCR)).isPositive();
    long recorded = ok.opsByKind().values().stream().mapToLong(Long::longValue).sum();
    assertThat(History.read(ok.history())).hasSize(Math.toIntExact(recorded));

    // The negative control: calls that time out (300 ms) are sent again as new calls. The first
    // copy stays in its session and is applied too, and the checkers must say so.
    Campaign.Report control =
        Campaign.run(
            dir.resolve("at-least-once"),
            new Campaign.Settings(
                seed, 3, Duration.ofSeconds(30), 4, 2, Duration.ofSeconds(3), true));
    System.out.println("negative control " + control);
    assertThat(control.violations())
        .extracting(Violation::kind)
        .contains(Violation.Kind.DUPLICATE)
        .doesNotContain(Violation.Kind.DIVERGENCE);
  }
}
