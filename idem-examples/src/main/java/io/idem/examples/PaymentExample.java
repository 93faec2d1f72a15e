package io.idem.examples;

import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeySettlement;
import io.idem.client.Write;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Seed 001's {@code withdraw(id, account, amount)} with an idempotency key on Idem: the request is
 * delivered {@code copies} times at once (a client's retries, a queue's redeliveries), and the
 * account is debited once. Each copy acquires the key; the one that gets it debits the account in
 * the same command that completes the key (so a crash cannot separate the two), the others wait for
 * its outcome and replay it.
 *
 * <pre>
 * java -cp idem-examples/target/idem-examples.jar io.idem.examples.PaymentExample \
 *     127.0.0.1:7001 pay-42 alice 100 3
 * </pre>
 */
public final class PaymentExample {
  private PaymentExample() {}

  /** What a run did: each copy's answer and the account's balance after it. */
  record Outcome(List<String> answers, long balance) {}

  /** Arguments: servers, payment id, account, amount, copies. */
  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println(
          "usage: PaymentExample <host:port,...> <payment-id> <account> <amount> <copies>");
      System.exit(2);
    }
    long amount;
    int copies;
    try {
      amount = Long.parseLong(args[3]);
      copies = Integer.parseInt(args[4]);
    } catch (NumberFormatException e) {
      System.err.println("amount and copies must be numbers: " + e.getMessage());
      System.exit(2);
      return;
    }
    if (amount < 1 || copies < 1 || copies > 64) {
      System.err.println("amount must be positive and copies in [1, 64]");
      System.exit(2);
      return;
    }
    try (IdemClient client =
        IdemClient.builder().servers(args[0]).requestTimeout(Duration.ofSeconds(30)).build()) {
      Outcome o = run(client, args[1], args[2], amount, copies);
      o.answers().forEach(a -> System.out.println("copy answered: " + a));
      System.out.println("balance of " + args[2] + ": " + o.balance());
    }
  }

  /** Delivers the payment {@code copies} times at once; returns the answers and the balance. */
  static Outcome run(IdemClient client, String id, String account, long amount, int copies)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(copies);
    try {
      List<Future<String>> calls = new ArrayList<>();
      for (int i = 0; i < copies; i++) {
        calls.add(pool.submit(() -> withdraw(client, id, account, amount)));
      }
      List<String> answers = new ArrayList<>();
      for (Future<String> f : calls) {
        answers.add(f.get());
      }
      long balance =
          client.get("balance/" + account).map(kv -> Long.parseLong(kv.valueAsString())).orElse(0L);
      return new Outcome(answers, balance);
    } finally {
      pool.shutdownNow();
    }
  }

  /** One delivery of the payment: runs it, or replays the answer of the copy that ran it. */
  static String withdraw(IdemClient client, String id, String account, long amount)
      throws InterruptedException {
    byte[] fingerprint = (account + ":" + amount).getBytes(StandardCharsets.UTF_8);
    for (int attempt = 0; attempt < 600; attempt++) {
      KeyAcquisition a =
          client.acquireKey(
              "payments", id, fingerprint, Duration.ofSeconds(10), Duration.ofHours(24));
      if (a instanceof KeyAcquisition.Completed done) {
        return new String(done.response(), StandardCharsets.UTF_8);
      }
      if (a instanceof KeyAcquisition.Mismatch) {
        throw new IllegalArgumentException(id + " was used for another payment");
      }
      if (a instanceof KeyAcquisition.Acquired owned) {
        String receipt =
            "debited " + amount + " from " + account + " (token " + owned.token() + ")";
        KeySettlement s =
            client.completeKey(
                "payments",
                id,
                owned.token(),
                receipt.getBytes(StandardCharsets.UTF_8),
                Write.increment(
                    "balance/" + account, -amount)); // the debit and the completion: one step
        if (s instanceof KeySettlement.Settled) {
          return receipt;
        }
        // Fenced: this copy was too slow and another took the key over; ask again.
      } else {
        Thread.sleep(50); // another copy holds the key: wait for its outcome
      }
    }
    throw new IllegalStateException(id + " stayed in progress for 30 s");
  }
}
