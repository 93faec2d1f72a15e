package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The keys campaign on Redis ({@code idem verify --workload keys --store redis|seed001}), 30 s
 * each: payment workers in processes of their own on a private redis-server ({@code appendfsync
 * always}), under kill -9 and SIGSTOP of workers and kill -9 of redis-server. On the Redis store,
 * whose completions carry the ledger entry: every payment exactly once. On seed 001's algorithm,
 * the negative control: the checker must flag double payments.
 */
@Tag("slow")
@Tag("campaign")
@Timeout(180)
class RedisKeysCampaignTest {
  static final Duration SHORT = Duration.ofSeconds(30);

  @TempDir Path dir;

  @Test
  void onTheRedisStoreEveryPaymentIsAppliedExactlyOnceThroughRedisRestarts() throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("redis"),
            KeysCampaign.Settings.ci(CampaignTest.seed("keys on redis"), false)
                .on("redis")
                .lasting(SHORT));
    System.out.println("keys campaign on redis " + summary(r));
    assertThat(r.store()).isEqualTo("redis");
    assertThat(r.violations()).isEmpty();
    assertThat(r.payments()).isGreaterThan(50);
    assertThat(r.acknowledged()).isGreaterThan(r.payments());
    assertThat(r.faults().keySet())
        .containsExactlyInAnyOrder(
            "kill -9 worker", "SIGSTOP worker past its deadline", "kill -9 redis-server");
    assertThat(r.refusals()).as("stale owners whose completions were fenced").isPositive();
  }

  @Test
  void onSeed001sAlgorithmTheSameFaultsPayPaymentsTwiceAndTheCheckerSaysSo() throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("seed001"),
            KeysCampaign.Settings.ci(CampaignTest.seed("keys on seed001"), false)
                .on("seed001")
                .lasting(SHORT));
    System.out.println("keys campaign on seed001 " + summary(r));
    assertThat(r.faults()).containsKey("kill -9 redis-server");
    assertThat(r.violations())
        .extracting(Violation::kind)
        .as("double payments flagged")
        .contains(Violation.Kind.DUPLICATE);
  }

  /** The report with its violations counted by kind and the first five spelled out. */
  static String summary(KeysCampaign.Report r) {
    Map<Violation.Kind, Long> byKind =
        r.violations().stream()
            .collect(Collectors.groupingBy(Violation::kind, TreeMap::new, Collectors.counting()));
    return String.format(
        "seed %d: %d payments, %d answers, %d fenced refusals, faults %s, violations %s %s, in %s",
        r.seed(),
        r.payments(),
        r.acknowledged(),
        r.refusals(),
        r.faults(),
        byKind,
        r.violations().stream().limit(5).toList(),
        r.dir());
  }
}
