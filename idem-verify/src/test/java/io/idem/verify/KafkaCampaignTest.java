package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Kafka campaign's ci profile ({@code idem verify --workload kafka}): consumer processes apply
 * payment records from a real broker through the exactly-once receiver, under kill -9 and SIGSTOP
 * of consumers, rebalances, broker restarts and the store's faults; and the negative control, a
 * plain consumer committing Kafka's offsets after its batch, whose duplicates the checker must
 * flag.
 */
@Tag("slow")
@Timeout(400)
class KafkaCampaignTest {
  @TempDir(cleanup = CleanupMode.ON_SUCCESS)
  Path dir;

  static String summary(KafkaCampaign.Report r) {
    return "seed "
        + r.seed()
        + ": "
        + r.records()
        + " records, "
        + r.entries()
        + " ledger entries, faults "
        + r.faults()
        + ", violations "
        + r.violations().size()
        + (r.violations().isEmpty()
            ? ""
            : " " + r.violations().subList(0, Math.min(5, r.violations().size())));
  }

  @Test
  void onIdemEveryRecordIsAppliedOnceInOrderWithItsOffset() throws Exception {
    KafkaCampaign.Report r =
        KafkaCampaign.run(
            dir.resolve("idem"),
            KafkaCampaign.Settings.ci(CampaignTest.seed("kafka on idem"), "idem"));
    System.out.println("kafka campaign on idem " + summary(r));
    assertThat(r.violations()).isEmpty();
    assertThat(r.records()).isGreaterThan(1_000);
    assertThat(r.entries()).isEqualTo(r.records());
    assertThat(r.faults().keySet())
        .contains(
            "kill -9 consumer",
            "SIGSTOP consumer past max.poll.interval.ms",
            "broker restart",
            "kill -9 leader");
  }

  @Tag("campaign")
  @Test
  void onPostgresEveryRecordIsAppliedOnceInOrderWithItsOffset() throws Exception {
    KafkaCampaign.Report r =
        KafkaCampaign.run(
            dir.resolve("postgres"),
            KafkaCampaign.Settings.ci(CampaignTest.seed("kafka on postgres"), "postgres"));
    System.out.println("kafka campaign on postgres " + summary(r));
    assertThat(r.violations()).isEmpty();
    assertThat(r.records()).isGreaterThan(1_000);
    assertThat(r.entries()).isEqualTo(r.records());
    assertThat(r.faults().keySet())
        .contains(
            "kill -9 consumer",
            "SIGSTOP consumer past max.poll.interval.ms",
            "broker restart",
            "immediate shutdown of postgres");
  }

  @Test
  void aPlainConsumerCommittingAfterItsBatchIsFlaggedForDuplicates() throws Exception {
    KafkaCampaign.Report r =
        KafkaCampaign.run(
            dir.resolve("plain"),
            KafkaCampaign.Settings.ci(CampaignTest.seed("kafka plain"), "plain"));
    System.out.println("kafka campaign, plain consumer " + summary(r));
    assertThat(r.violations()).anyMatch(v -> v.kind() == Violation.Kind.DUPLICATE);
  }
}
