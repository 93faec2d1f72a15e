package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The keys campaign's ci profile ({@code idem verify --workload keys}): payment workers in
 * processes of their own, with idempotency keys on three real server processes, under kill -9 and
 * SIGSTOP of workers, lost responses and leader kills: every payment exactly once, no stale write.
 * Its failovers profile: a ledger of fenced appends under failovers longer than the in-progress
 * timeout. And the negative control, unfenced, which the checker must catch.
 */
@Tag("slow")
@Timeout(300)
class KeysCampaignTest {
  @TempDir Path dir;

  @Test
  void everyPaymentIsAppliedExactlyOnceAndNoStaleWriteLands() throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("fenced"), KeysCampaign.Settings.ci(CampaignTest.seed("keys"), false));
    System.out.println("keys campaign " + r);
    assertThat(r.violations()).isEmpty();
    assertThat(r.payments()).isGreaterThan(100);
    assertThat(r.acknowledged()).isGreaterThan(r.payments());
    assertThat(r.faults().keySet())
        .contains(
            "kill -9 worker",
            "SIGSTOP worker past its deadline",
            "responses lost",
            "kill -9 leader");
    assertThat(r.refusals()).as("stale owners the fences stopped").isPositive();
  }

  /**
   * Issue 36: the ledger written with fenced appends before a plain completion, under failovers
   * longer than the keys' in-progress timeout (SIGSTOP of the leader, a 1.2-2 s election, a 1 s
   * timeout). Owners' writes held up by a failover are refused (taken over, or, from log format 8,
   * past their deadline); an owner that took a key over reconciles with the ledger before it
   * appends. Every payment once, every answer the stored one.
   */
  @Test
  void aFencedLedgerPaysOnceAcrossFailoversLongerThanTheInProgressTimeout() throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("failovers"),
            KeysCampaign.Settings.failovers(CampaignTest.seed("keys failovers")));
    System.out.println("keys failovers " + r);
    assertThat(r.violations()).isEmpty();
    assertThat(r.payments()).isGreaterThan(10);
    assertThat(r.faults()).containsOnlyKeys(IdemPayments.PAUSE_LEADER);
    assertThat(r.refusals()).as("owners held up by a failover, fenced off").isPositive();
  }

  @Test
  void unfencedWritesOfPausedOwnersAreCaughtAsDoublePayments() throws Exception {
    KeysCampaign.Report r =
        KeysCampaign.run(
            dir.resolve("unfenced"),
            KeysCampaign.Settings.ci(CampaignTest.seed("keys negative control"), true));
    System.out.println("keys negative control " + r);
    assertThat(r.violations())
        .extracting(Violation::kind)
        .contains(Violation.Kind.DUPLICATE, Violation.Kind.STALE_WRITE);
  }
}
