package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class LeaseCheckerTest {
  private final List<Op> h = new ArrayList<>();
  private long clock;

  private void op(String process, Op.Fn f, long ttl, Op.Outcome o, Long result) {
    long start = ++clock;
    h.add(
        new Op(
            h.size() + 1,
            process,
            f,
            "lock",
            ttl,
            0,
            0,
            start,
            o == Op.Outcome.INFO ? Long.MAX_VALUE : start + 1,
            o,
            result));
  }

  @Test
  void revokeThenGrantIsAHandover() {
    op("a", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L); // held from 1000
    op("a", Op.Fn.REVOKE, 0, Op.Outcome.OK, 1_500L);
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_500L); // from 1500: as a's ended
    assertThat(LeaseChecker.check(h)).isEmpty();
  }

  @Test
  void revokeAndGrantInOneEntryShareALogTime() {
    // b's grant is listed first on purpose: tenures with one start time are compared both ways.
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L); // from 1000
    op("a", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L); // from 1000 too: grant, revoke and b's
    op("a", Op.Fn.REVOKE, 0, Op.Outcome.OK, 1_000L); // grant were all in one entry
    assertThat(LeaseChecker.check(h)).isEmpty();
    op("c", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L); // also from 1000: two live holders
    assertThat(LeaseChecker.check(h)).hasSize(1);
  }

  @Test
  void grantBeforeTheHoldersExpiryIsAViolation() {
    op("a", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L);
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 4_500L); // from 2500 < 3000
    assertThat(LeaseChecker.check(h))
        .singleElement()
        .satisfies(v -> assertThat(v.kind()).isEqualTo(Violation.Kind.LEASE))
        .satisfies(v -> assertThat(v.detail()).contains("b was granted it at log time 2500"));
  }

  @Test
  void renewalExtendsTheTenure() {
    op("a", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L);
    op("a", Op.Fn.RENEW, 0, Op.Outcome.OK, 4_000L);
    op("a", Op.Fn.RENEW, 0, Op.Outcome.FAIL, null); // it expired later
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 5_500L); // from 3500 < 4000
    assertThat(LeaseChecker.check(h)).hasSize(1);
    h.remove(h.size() - 1);
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 6_001L); // from 4001
    assertThat(LeaseChecker.check(h)).isEmpty();
  }

  @Test
  void unknownOutcomesAreNeverHeldAgainstAnyone() {
    op("a", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L);
    op("a", Op.Fn.REVOKE, 0, Op.Outcome.INFO, null); // may have ended it at once
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_500L);
    op("c", Op.Fn.GRANT, 2_000, Op.Outcome.INFO, null); // may or may not have been granted
    assertThat(LeaseChecker.check(h)).isEmpty();
  }

  /**
   * What the campaign would see if a former holder's late keep-alive renewed the next holder's
   * lease (leases had no holder): the former holder is told it holds the lease past the new grant.
   */
  @Test
  void formerHolderRenewingTheNextHoldersLeaseIsFlagged() {
    op("a", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 3_000L); // a's lease expires at 3000
    op("b", Op.Fn.GRANT, 2_000, Op.Outcome.OK, 5_100L); // granted at 3100
    op("a", Op.Fn.RENEW, 0, Op.Outcome.OK, 5_200L); // a late keep-alive renewed b's lease
    assertThat(LeaseChecker.check(h))
        .singleElement()
        .satisfies(v -> assertThat(v.detail()).contains("until at least 5200"));
  }
}
