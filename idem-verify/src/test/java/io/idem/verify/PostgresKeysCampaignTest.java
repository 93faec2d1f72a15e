package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The keys campaign on PostgreSQL ({@code idem verify --workload keys --store postgres}), 30 s:
 * payment workers in processes of their own on a private PostgreSQL (fsync on), under kill -9 and
 * SIGSTOP of workers and immediate shutdowns of the server. The store's transactional mode inserts
 * each payment's ledger row in the transaction that completes its key: every payment exactly once.
 */
@Tag("slow")
@Timeout(180)
class PostgresKeysCampaignTest {
  @TempDir Path dir;

  @Test
  void onThePostgresStoreEveryPaymentIsAppliedExactlyOnceThroughServerCrashes() throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("postgres"),
            KeysCampaign.Settings.ci(CampaignTest.seed("keys on postgres"), false)
                .on("postgres")
                .lasting(Duration.ofSeconds(30)));
    System.out.println("keys campaign on postgres " + RedisKeysCampaignTest.summary(r));
    assertThat(r.store()).isEqualTo("postgres");
    assertThat(r.violations()).isEmpty();
    assertThat(r.payments()).isGreaterThan(50);
    assertThat(r.acknowledged()).isGreaterThan(r.payments());
    assertThat(r.faults().keySet())
        .containsExactlyInAnyOrder(
            "kill -9 worker", "SIGSTOP worker past its deadline", "immediate shutdown of postgres");
  }
}
