package io.idem.keys;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The executor's promise, against the real key state machine in this JVM. */
@Timeout(30)
class IdempotentExecutorTest {
  static final IdempotencyKey KEY = new IdempotencyKey("shop-1", "payment-42");
  static final Fingerprint FP = Fingerprint.of("amount=10".getBytes(StandardCharsets.UTF_8));
  static final IdempotentExecutor.Codec<String> TEXT = IdempotentExecutor.Codec.utf8();

  final AtomicLong manualClock = new AtomicLong(1_000_000);
  final CoreKeyStore realTime = new CoreKeyStore(System::currentTimeMillis);
  final CoreKeyStore manual = new CoreKeyStore(manualClock::get);
  final AtomicInteger runs = new AtomicInteger();
  IdempotentExecutor executor;

  @AfterEach
  void close() {
    if (executor != null) {
      executor.close();
    }
  }

  IdempotentExecutor.Operation<String> charge(String receipt) {
    return token -> {
      runs.incrementAndGet();
      return receipt + "@" + token;
    };
  }

  @Test
  void theFirstCallRunsAndEveryRetryReplaysItsResultWithoutRunning() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    String first = executor.execute(KEY, FP, TEXT, charge("r1"));
    String again = executor.execute(KEY, FP, TEXT, charge("r2"));
    assertThat(again).isEqualTo(first).startsWith("r1@");
    assertThat(runs).hasValue(1);
  }

  @Test
  void theOperationSeesTheTokenThatOwnsTheKey() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    long[] seen = new long[1];
    executor.execute(
        KEY,
        FP,
        TEXT,
        token -> {
          seen[0] = token;
          assertThat(realTime.currentToken(KEY)).isEqualTo(token);
          return "ok";
        });
    assertThat(seen[0]).isPositive();
  }

  @Test
  void aKeyReusedWithAnotherPayloadIsAMismatchAndNothingRuns() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    executor.execute(KEY, FP, TEXT, charge("r1"));
    assertThatThrownBy(
            () -> executor.execute(KEY, Fingerprint.of(new byte[] {9}), TEXT, charge("x")))
        .isInstanceOf(KeyMismatchException.class)
        .hasMessageContaining("shop-1/payment-42");
    assertThat(runs).hasValue(1);
  }

  @Test
  void aConcurrentDuplicateWaitsForTheResultWhenAskedTo() throws Exception {
    executor = IdempotentExecutor.builder(realTime).waitForResult(Duration.ofSeconds(10)).build();
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    CompletableFuture<String> first =
        async(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    TEXT,
                    token -> {
                      runs.incrementAndGet();
                      started.countDown();
                      finish.await();
                      return "r1";
                    }));
    assertThat(started.await(10, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<String> duplicate =
        async(() -> executor.execute(KEY, FP, TEXT, charge("never")));
    finish.countDown();
    assertThat(duplicate.get(10, TimeUnit.SECONDS)).isEqualTo("r1");
    assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("r1");
    assertThat(runs).hasValue(1);
  }

  static CompletableFuture<String> async(java.util.concurrent.Callable<String> call) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return call.call();
          } catch (Exception e) {
            throw new IllegalStateException(e);
          }
        });
  }

  @Test
  void aConcurrentDuplicateFailsAtOnceWhenNotWaiting() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY, FP, TEXT, token -> executor.execute(KEY, FP, TEXT, charge("inner"))))
        .isInstanceOf(KeyInProgressException.class);
    assertThat(runs).hasValue(0);
  }

  @Test
  void aFailureReleasesTheKeySoThatARetryRunsAgain() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    TEXT,
                    token -> {
                      runs.incrementAndGet();
                      throw new java.io.IOException("bank unreachable");
                    }))
        .isInstanceOf(java.io.IOException.class);
    assertThat(executor.execute(KEY, FP, TEXT, charge("r2"))).startsWith("r2@");
    assertThat(runs).hasValue(2);
  }

  @Test
  void aFailureOfAChosenTypeIsTheFinalOutcomeAndIsReplayed() throws Exception {
    executor =
        IdempotentExecutor.builder(realTime).storeFailures(IllegalStateException.class).build();
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    TEXT,
                    token -> {
                      runs.incrementAndGet();
                      throw new IllegalStateException("card declined");
                    }))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> executor.execute(KEY, FP, TEXT, charge("never")))
        .isInstanceOfSatisfying(
            StoredFailureException.class,
            e -> {
              assertThat(e.failureType()).isEqualTo(IllegalStateException.class.getName());
              assertThat(e).hasMessageContaining("card declined");
            });
    assertThat(runs).hasValue(1);
  }

  @Test
  void anOwnerPastItsDeadlineIsFencedOnceAnotherTookTheKeyOver() throws Exception {
    executor =
        IdempotentExecutor.builder(manual)
            .inProgressTimeout(Duration.ofSeconds(30))
            .renewEvery(Duration.ZERO)
            .build();
    IdempotentExecutor other = IdempotentExecutor.builder(manual).renewEvery(Duration.ZERO).build();
    try {
      assertThatThrownBy(
              () ->
                  executor.execute(
                      KEY,
                      FP,
                      TEXT,
                      token -> {
                        // A pause past the deadline: another process takes over and finishes.
                        manualClock.addAndGet(30_001);
                        assertThat(other.execute(KEY, FP, TEXT, charge("taken over")))
                            .startsWith("taken over@");
                        return "stale";
                      }))
          .isInstanceOf(KeyFencedException.class);
      assertThat(other.execute(KEY, FP, TEXT, charge("never"))).startsWith("taken over@");
    } finally {
      other.close();
    }
  }

  @Test
  void aLongOperationRenewsItsKeySoThatNoDuplicateTakesItOver() throws Exception {
    executor =
        IdempotentExecutor.builder(realTime)
            .inProgressTimeout(Duration.ofMillis(300))
            .renewEvery(Duration.ofMillis(50))
            .build();
    String r =
        executor.execute(
            KEY,
            FP,
            TEXT,
            token -> {
              runs.incrementAndGet();
              long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1_000);
              while (System.nanoTime() < end) {
                assertThatThrownBy(() -> executor.execute(KEY, FP, TEXT, charge("dup")))
                    .isInstanceOf(KeyInProgressException.class);
                Thread.sleep(100);
              }
              return "long";
            });
    assertThat(r).isEqualTo("long");
    assertThat(runs).hasValue(1);
  }

  @Test
  void aStoreErrorIsNeverAYesAndNothingRuns() {
    executor = IdempotentExecutor.builder(realTime).build();
    realTime.failing.set(true);
    assertThatThrownBy(() -> executor.execute(KEY, FP, TEXT, charge("never")))
        .isInstanceOf(KeyStoreException.class)
        .hasMessageContaining("connection to the store lost");
    assertThat(runs).hasValue(0);
  }

  @Test
  void keysAndSettingsAreValidatedWithClearErrors() {
    assertThatThrownBy(() -> new IdempotencyKey("s", ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("key must have 1 to 255 characters");
    assertThatThrownBy(() -> new IdempotencyKey("s", "k".repeat(256)))
        .hasMessageContaining("256 characters");
    assertThatThrownBy(() -> IdempotentExecutor.builder(realTime).retention(Duration.ZERO))
        .hasMessageContaining("retention must be positive");
    assertThatThrownBy(
            () ->
                IdempotentExecutor.builder(realTime)
                    .inProgressTimeout(Duration.ofSeconds(1))
                    .renewEvery(Duration.ofSeconds(2))
                    .build())
        .hasMessageContaining("renewEvery");
    assertThat(Fingerprint.of(new byte[] {1})).isEqualTo(Fingerprint.of(new byte[] {1}));
    assertThat(Fingerprint.of(new byte[] {1}).bytes()).hasSize(32);
  }
}
