package io.idem.examples.payments;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The payments demo end to end: a real store, the service in its own process killed with SIGKILL,
 * clients over real HTTP that drop answers and retry. With the filter, the balances match the
 * acknowledged withdrawals; without it (the negative control), the verdict finds double
 * withdrawals. Both runs must have met their faults, or they prove nothing.
 */
class PaymentsDemoTest {

  static PaymentsDemo.Report run(boolean idempotency, StringBuilder printed) throws Exception {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    PaymentsDemo.Report r;
    try (PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8)) {
      r = PaymentsDemo.run(new PaymentsDemo.Options(12, idempotency, 6, 0.25, 7), out);
    }
    printed.append(bytes.toString(StandardCharsets.UTF_8));
    System.out.println(printed);
    return r;
  }

  @Test
  @Timeout(240)
  void withTheFilterEveryAccountIsDebitedExactlyTheAcknowledgedWithdrawals() throws Exception {
    StringBuilder printed = new StringBuilder();
    PaymentsDemo.Report r = run(true, printed);
    assertThat(r.acknowledged()).isGreaterThan(50);
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
