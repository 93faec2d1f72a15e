package io.idem.examples.payments;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The payments demo end to end: a real store, the service in its own process killed with SIGKILL,
 * clients over real HTTP that drop answers and retry. With the filter, the balances match the
 * acknowledged withdrawals; without it (the negative control), the verdict finds double
 * withdrawals. Both runs must have met their faults, or they prove nothing.
 */
@Tag("slow")
class PaymentsDemoTest {

  static PaymentsDemo.Report run(boolean idempotency, StringBuilder printed) throws Exception {
    StringWriter text = new StringWriter();
    PaymentsDemo.Report r;
    try (PrintWriter out = new PrintWriter(text, true)) {
      r = PaymentsDemo.run(new PaymentsDemo.Options(16, idempotency, 8, 0.4, 7), out);
    }
    printed.append(text);
    System.out.println(printed);
    return r;
  }

  @Test
  @Timeout(240)
  void withTheFilterEveryAccountIsDebitedExactlyTheAcknowledgedWithdrawals() throws Exception {
    StringBuilder printed = new StringBuilder();
    PaymentsDemo.Report r = run(true, printed);
    assertThat(r.acknowledged()).isGreaterThanOrEqualTo(10);
    assertThat(r.responsesDropped()).isPositive(); // the faults happened
    assertThat(r.replays()).isPositive(); // and retries were answered from the store
    assertThat(r.extraDebited()).isZero();
    assertThat(r.missing()).isZero();
    assertThat(r.pass()).isTrue();
    assertThat(printed).contains("verdict: PASS").contains("kill -9 of the payments service");
  }

  @Test
  @Timeout(240)
  void withoutTheFilterTheVerdictFindsDoubleWithdrawals() throws Exception {
    StringBuilder printed = new StringBuilder();
    PaymentsDemo.Report r = run(false, printed);
    assertThat(r.responsesDropped()).isPositive();
    assertThat(r.replays()).isZero();
    assertThat(r.extraDebited()).isPositive();
    assertThat(r.pass()).isFalse();
    assertThat(printed).contains("DOUBLE WITHDRAWALS");
  }
}
