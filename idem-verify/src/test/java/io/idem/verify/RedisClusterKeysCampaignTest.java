package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The keys campaign on Redis Cluster ({@code idem verify --workload keys --store redis-cluster}),
 * 60 s: payment workers in processes of their own on six private redis-server nodes (three masters
 * with a replica each), the store waiting for one replica after each script, under kill -9 and
 * SIGSTOP of workers, kill -9 of the master serving the payments' slot (its replica takes over),
 * CLUSTER FAILOVER and the slot moved to another master under load. Every payment exactly once: the
 * ledger entry lives in the record's slot and lands with the completion.
 */
@Tag("slow")
@Timeout(300)
class RedisClusterKeysCampaignTest {
  static final Duration RUN = Duration.ofSeconds(60);

  @TempDir Path dir;

  @Test
  void onRedisClusterEveryPaymentIsAppliedExactlyOnceThroughFailoversAndSlotMoves()
      throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("redis-cluster"),
            KeysCampaign.Settings.ci(CampaignTest.seed("keys on redis-cluster"), false)
                .on("redis-cluster")
                .lasting(RUN));
    System.out.println("keys campaign on redis-cluster " + RedisKeysCampaignTest.summary(r));
    assertThat(r.store()).isEqualTo("redis-cluster");
    assertThat(r.violations()).isEmpty();
    assertThat(r.payments()).isGreaterThan(50);
    assertThat(r.acknowledged()).isGreaterThan(r.payments());
    assertThat(r.faults().keySet())
        .contains("kill -9 redis master", "CLUSTER FAILOVER", "reshard the payments slot");
  }
}
