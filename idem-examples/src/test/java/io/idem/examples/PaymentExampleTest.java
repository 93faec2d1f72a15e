package io.idem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The README's payment example, against a real one-node cluster. */
@Timeout(120)
class PaymentExampleTest {
  @TempDir Path dir;

  @Test
  void aPaymentDeliveredFiveTimesAtOnceIsDebitedOnceAndEveryCopyGetsItsReceipt() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      try (IdemClient client = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        PaymentExample.Outcome first = PaymentExample.run(client, "pay-43", "bob", 100, 5);
        assertThat(first.balance()).isEqualTo(-100);
        assertThat(first.answers()).hasSize(5).containsOnly(first.answers().get(0));
        assertThat(first.answers().get(0)).startsWith("debited 100 from bob (token ");
        // A later retry replays; another payment debits again.
        PaymentExample.Outcome retry = PaymentExample.run(client, "pay-43", "bob", 100, 2);
        assertThat(retry.answers()).containsOnly(first.answers().get(0));
        assertThat(retry.balance()).isEqualTo(-100);
        assertThat(PaymentExample.run(client, "pay-44", "bob", 20, 1).balance()).isEqualTo(-120);
      }
    }
  }
}
