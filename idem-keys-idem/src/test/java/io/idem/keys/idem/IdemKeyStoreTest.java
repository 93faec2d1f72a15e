package io.idem.keys.idem;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.CasMismatchException;
import io.idem.client.Fence;
import io.idem.client.FencedWriteException;
import io.idem.client.IdemClient;
import io.idem.client.Write;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyStoreFullException;
import io.idem.keys.contract.KeyStoreContract;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Quotas;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The store contract ({@link KeyStoreContract}) on a real (in-process, one-node) Idem cluster, and
 * what only the Idem store does: the token is the record's, and a completion carries its business
 * write.
 */
@Timeout(120)
class IdemKeyStoreTest extends KeyStoreContract {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static IdemClient client;
  static IdemKeyStore store;
  static IdemClient nobody;

  @BeforeAll
  static void start() {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
    client = IdemClient.builder().servers(cluster.clientAddresses()).build();
    store = IdemKeyStore.over(client);
    nobody =
        IdemClient.builder()
            .servers("127.0.0.1:" + LocalCluster.freePort())
            .requestTimeout(Duration.ofMillis(500))
            .build();
  }

  @AfterAll
  static void stop() {
    nobody.close();
    client.close();
    cluster.close();
  }

  @Override
  protected KeyStore<?> store() {
    return store;
  }

  @Override
  protected KeyStore<?> unreachableStore() {
    return IdemKeyStore.over(nobody);
  }

  @Test
  void theTokenTheOperationSeesIsTheOneInTheKeysRecord() throws Exception {
    AtomicInteger runs = new AtomicInteger();
    try (var ex = IdempotentExecutor.builder(store).build()) {
      IdempotencyKey key = new IdempotencyKey("acme", "order-1");
      Fingerprint fp = Fingerprint.of(utf8("100 EUR"));
      List<String> answers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        answers.add(
            ex.execute(
                key,
                fp,
                IdempotentExecutor.Codec.utf8(),
                token -> "paid with token " + token + " run " + runs.incrementAndGet()));
      }
      assertThat(runs).hasValue(1);
      assertThat(answers).containsOnly(answers.get(0));
      long token = client.getKey("acme", "order-1").orElseThrow().token();
      assertThat(answers.get(0)).isEqualTo("paid with token " + token + " run 1");
    }
  }

  @Test
  void aTakeoverFencesTheFirstOwnersCompletionEffectAndWrites() throws Exception {
    IdempotencyKey key = new IdempotencyKey("acme", "payment-7");
    Acquisition.Acquired first =
        (Acquisition.Acquired)
            join(
                store.acquire(
                    key, Fingerprint.none(), Duration.ofMillis(200), Duration.ofHours(1)));
    // The first owner stalls past its deadline (log time); a duplicate takes the key over.
    Acquisition second = null;
    for (int i = 0; i < 100; i++) {
      second =
          join(store.acquire(key, Fingerprint.none(), Duration.ofMinutes(1), Duration.ofHours(1)));
      if (second instanceof Acquisition.Acquired) {
        break;
      }
      Thread.sleep(50);
    }
    assertThat(second).isInstanceOf(Acquisition.Acquired.class);
    long newer = ((Acquisition.Acquired) second).token();
    assertThat(newer).isGreaterThan(first.token());

    // The stale owner's fenced write and its completion (with its effect) change nothing.
    IdemClient stale = client.fenced(new Fence("acme", "payment-7", first.token()));
    assertThatThrownBy(() -> stale.increment("balance/7", -100))
        .isInstanceOfSatisfying(
            FencedWriteException.class, e -> assertThat(e.currentToken()).isEqualTo(newer));
    assertThat(
            join(
                store.complete(
                    key, first.token(), utf8("stale"), Write.append("ledger/7", utf8("x")))))
        .isEqualTo(new Settlement.Fenced(newer));
    assertThat(client.get("balance/7")).isEmpty();
    assertThat(client.get("ledger/7")).isEmpty();

    // The new owner writes fenced, and completes with its ledger entry in the same step; a failing
    // effect first leaves the key its own.
    IdemClient owner = client.fenced(new Fence("acme", "payment-7", newer));
    assertThat(owner.increment("balance/7", -100)).isEqualTo(-100);
    assertThatThrownBy(
            () ->
                join(
                    store.complete(
                        key, newer, utf8("paid"), Write.compareAndSet("ledger/7", 5, utf8("x")))))
        .isInstanceOf(CompletionException.class)
        .hasCauseInstanceOf(CasMismatchException.class);
    assertThat(join(store.complete(key, newer, utf8("paid"), Write.append("ledger/7", utf8("p7")))))
        .isEqualTo(new Settlement.Done(0));
    assertThat(client.get("ledger/7").orElseThrow().elements()).hasSize(1);
    assertThat(
            join(
                store.acquire(key, Fingerprint.none(), Duration.ofMinutes(1), Duration.ofHours(1))))
        .isEqualTo(new Acquisition.Completed(utf8("paid")));
    // Once completed, the owner's token still passes a fence (the record keeps it); a token that
    // was never handed out does not.
    assertThatThrownBy(
            () -> client.fenced(new Fence("acme", "payment-7", newer + 1)).put("x", utf8("y")))
        .isInstanceOf(FencedWriteException.class);
  }

  @Test
  void theExecutorsEffectIsTheCompletionsWriteAppliedOnce() throws Exception {
    client.put("balance/8", "100");
    AtomicInteger runs = new AtomicInteger();
    try (var ex = IdempotentExecutor.builder(store).build()) {
      IdempotencyKey key = new IdempotencyKey("acme", "payment-8");
      for (int i = 0; i < 3; i++) {
        String answer =
            ex.execute(
                key,
                Fingerprint.none(),
                Duration.ZERO,
                IdempotentExecutor.Codec.utf8(),
                token -> {
                  runs.incrementAndGet();
                  return IdempotentExecutor.Outcome.withEffect(
                      "debited 30", Write.increment("balance/8", -30));
                });
        assertThat(answer).isEqualTo("debited 30");
      }
      assertThat(runs).hasValue(1);
      assertThat(client.get("balance/8").orElseThrow().valueAsString()).isEqualTo("70");
      // Another effect type does not compile; forced through an unchecked cast, it is refused
      // before anything is sent, and the key is released.
      @SuppressWarnings("unchecked")
      var raw = (IdempotentExecutor<Object>) (IdempotentExecutor<?>) ex;
      IdempotencyKey other = new IdempotencyKey("acme", "payment-9");
      assertThatThrownBy(
              () ->
                  raw.execute(
                      other,
                      Fingerprint.none(),
                      Duration.ZERO,
                      IdempotentExecutor.Codec.utf8(),
                      token -> IdempotentExecutor.Outcome.withEffect("x", "not a write")))
          .isInstanceOf(ClassCastException.class);
      assertThat(client.getKey("acme", "payment-9")).isEmpty();
    }
  }

  @Test
  void aKeyOverThePrincipalsQuotaIsRefusedAsFullAndNothingRuns() throws Exception {
    IdempotencyKey k = new IdempotencyKey("quota", "one-too-many");
    AtomicInteger runs = new AtomicInteger();
    try (RawSession admin = new RawSession(cluster.clientAddress(0))) {
      // With auth off, every client is one principal: a quota of 1 is below what it holds.
      configureKeyRecords(admin, 1);
      try (var ex = IdempotentExecutor.builder(store).build()) {
        assertThatThrownBy(
                () ->
                    ex.execute(
                        k,
                        Fingerprint.none(),
                        IdempotentExecutor.Codec.utf8(),
                        t -> "" + runs.get()))
            .isInstanceOfSatisfying(
                KeyStoreFullException.class, e -> assertThat(e.quota()).isTrue())
            .hasMessageContaining("quota key_records");
      } finally {
        configureKeyRecords(admin, 1_000_000);
      }
    }
    assertThat(runs).hasValue(0);
    assertThat(
            join(store.acquire(k, Fingerprint.none(), Duration.ofMinutes(1), Duration.ofHours(1))))
        .isInstanceOf(Acquisition.Acquired.class);
  }

  private static void configureKeyRecords(RawSession admin, long n) {
    assertThat(
            admin
                .configure(
                    ConfigureRequest.newBuilder()
                        .setQuotas(Quotas.newBuilder().setKeyRecords(n))
                        .build())
                .getCode())
        .isEqualTo(Code.OK);
  }
}
