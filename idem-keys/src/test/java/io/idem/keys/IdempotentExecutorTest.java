package io.idem.keys;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
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
  IdempotentExecutor<Runnable> executor;

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
    // The first call is released only after the store has told the duplicate "in progress" twice:
    // the duplicate met the held key, did not give up, and asked again. It is known to be waiting,
    // not arriving after the completion.
    CountDownLatch toldInProgressTwice = new CountDownLatch(2);
    KeyStore<Runnable> watched = countingInProgress(realTime, toldInProgressTwice);
    executor = IdempotentExecutor.builder(watched).waitForResult(Duration.ofSeconds(10)).build();
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
    try {
      assertThat(toldInProgressTwice.await(10, TimeUnit.SECONDS))
          .as("the duplicate asked again after the store told it the key is in progress")
          .isTrue();
      assertThat(duplicate).as("the duplicate is waiting").isNotDone();
    } finally {
      finish.countDown();
    }
    assertThat(duplicate.get(10, TimeUnit.SECONDS)).isEqualTo("r1");
    assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("r1");
    assertThat(runs).hasValue(1);
  }

  /** {@code inner}, counting {@code told} down at each acquire it answers with "in progress". */
  private static KeyStore<Runnable> countingInProgress(CoreKeyStore inner, CountDownLatch told) {
    return new KeyStore<>() {
      @Override
      public CompletionStage<Acquisition> acquire(
          IdempotencyKey k, Fingerprint f, Duration t, Duration r) {
        return inner
            .acquire(k, f, t, r)
            .thenApply(
                a -> {
                  if (a instanceof Acquisition.InProgress) {
                    told.countDown();
                  }
                  return a;
                });
      }

      @Override
      public CompletionStage<Settlement> complete(IdempotencyKey k, long token, byte[] response) {
        return inner.complete(k, token, response);
      }

      @Override
      public CompletionStage<Settlement> release(IdempotencyKey k, long token) {
        return inner.release(k, token);
      }

      @Override
      public CompletionStage<Settlement> renew(IdempotencyKey k, long token, Duration extension) {
        return inner.renew(k, token, extension);
      }
    };
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
    IdempotentExecutor<Runnable> other =
        IdempotentExecutor.builder(manual).renewEvery(Duration.ZERO).build();
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
          .isInstanceOfSatisfying(
              KeyFencedException.class,
              e -> {
                // Not "someone holds it": the other owner finished, and this is its outcome.
                assertThat(e.completedByAnother()).isTrue();
                assertThat(e.otherOutcome(TEXT)).startsWith("taken over@");
                assertThat(e).hasMessageContaining("another owner completed the key first");
              });
      assertThat(other.execute(KEY, FP, TEXT, charge("never"))).startsWith("taken over@");
    } finally {
      other.close();
    }
  }

  @Test
  void anOwnerOvertakenByAnOwnerStillRunningIsFencedWithoutAnOutcome() throws Exception {
    executor =
        IdempotentExecutor.builder(manual)
            .inProgressTimeout(Duration.ofSeconds(30))
            .renewEvery(Duration.ZERO)
            .build();
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    TEXT,
                    token -> {
                      manualClock.addAndGet(30_001);
                      assertThat(
                              manual.acquire(KEY, FP, Duration.ofSeconds(30), Duration.ofHours(1)))
                          .succeedsWithin(Duration.ofSeconds(5))
                          .isInstanceOf(Acquisition.Acquired.class);
                      return "stale";
                    }))
        .isInstanceOfSatisfying(
            KeyFencedException.class,
            e -> {
              assertThat(e.completedByAnother()).isFalse();
              assertThat(e.otherResponse()).isEmpty();
              assertThatThrownBy(() -> e.otherOutcome(TEXT))
                  .isInstanceOf(IllegalStateException.class);
            });
  }

  @Test
  void anAcquireWhoseAnswerCameAfterTheStoreTimeoutIsReleasedWhenItComes() throws Exception {
    // The store applies the acquire at once but its answer is held back, as behind a paused
    // network or a stopped server: the caller gives up, and the key must not stay held by nobody.
    CompletableFuture<Void> network = new CompletableFuture<>();
    KeyStore<Runnable> slow = delayedAcquires(realTime, network);
    try (IdempotentExecutor<Runnable> impatient =
        IdempotentExecutor.builder(slow).storeTimeout(Duration.ofMillis(200)).build()) {
      assertThatThrownBy(() -> impatient.execute(KEY, FP, TEXT, charge("never")))
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("did not answer within");
    }
    assertThat(realTime.currentToken(KEY)).as("the acquire landed").isPositive();
    network.complete(null); // the answer arrives
    executor = IdempotentExecutor.builder(realTime).build();
    assertThat(executor.execute(KEY, FP, TEXT, charge("retry"))).startsWith("retry@");
    assertThat(runs).hasValue(1);
  }

  @Test
  void aDuplicateThatGivesUpLearnsHowLongTheOwnerHoldsTheKey() throws Exception {
    assertThat(realTime.acquire(KEY, FP, Duration.ofSeconds(20), Duration.ofHours(1)))
        .succeedsWithin(Duration.ofSeconds(5))
        .isInstanceOf(Acquisition.Acquired.class);
    executor = IdempotentExecutor.builder(realTime).build();
    assertThatThrownBy(() -> executor.execute(KEY, FP, TEXT, charge("never")))
        .isInstanceOfSatisfying(
            KeyInProgressException.class,
            e ->
                assertThat(e.retryAfter())
                    .isGreaterThan(Duration.ofSeconds(15))
                    .isLessThanOrEqualTo(Duration.ofSeconds(20)));
    assertThat(runs).hasValue(0);
  }

  /** {@code inner}, whose acquire answers wait for {@code network} (applied at once). */
  private static KeyStore<Runnable> delayedAcquires(
      CoreKeyStore inner, CompletableFuture<Void> network) {
    return new KeyStore<>() {
      @Override
      public CompletionStage<Acquisition> acquire(
          IdempotencyKey k, Fingerprint f, Duration t, Duration r) {
        CompletionStage<Acquisition> applied = inner.acquire(k, f, t, r);
        return network.thenCompose(v -> applied);
      }

      @Override
      public CompletionStage<Settlement> complete(IdempotencyKey k, long token, byte[] response) {
        return inner.complete(k, token, response);
      }

      @Override
      public CompletionStage<Settlement> release(IdempotencyKey k, long token) {
        return inner.release(k, token);
      }

      @Override
      public CompletionStage<Settlement> renew(IdempotencyKey k, long token, Duration extension) {
        return inner.renew(k, token, extension);
      }
    };
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
  void aCallsOwnWaitBoundOverridesTheBuildersInBothDirections() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build(); // the builder's: no waiting
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
    CompletableFuture<String> waiting =
        async(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    Duration.ofSeconds(10),
                    TEXT,
                    token -> IdempotentExecutor.Outcome.of("never")));
    Thread.sleep(200); // the waiter asks while the first still runs
    finish.countDown();
    assertThat(waiting.get(10, TimeUnit.SECONDS)).isEqualTo("r1");
    assertThat(first.get(10, TimeUnit.SECONDS)).isEqualTo("r1");
    assertThat(runs).hasValue(1);

    IdempotentExecutor<Runnable> waits =
        IdempotentExecutor.builder(realTime).waitForResult(Duration.ofSeconds(10)).build();
    try {
      IdempotencyKey other = new IdempotencyKey("shop-1", "payment-43");
      long before = System.nanoTime();
      assertThatThrownBy(
              () ->
                  waits.execute(
                      other,
                      FP,
                      TEXT,
                      token ->
                          waits.execute(
                              other,
                              FP,
                              Duration.ZERO,
                              TEXT,
                              t -> IdempotentExecutor.Outcome.of("inner"))))
          .isInstanceOf(KeyInProgressException.class);
      assertThat(System.nanoTime() - before).isLessThan(TimeUnit.SECONDS.toNanos(5));
    } finally {
      waits.close();
    }
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    Duration.ofSeconds(-1),
                    TEXT,
                    token -> IdempotentExecutor.Outcome.of("x")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("waitForResult must be zero or positive");
  }

  @Test
  void anEffectLandsWithItsCompletionAndNotOnReplay() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    AtomicLong balance = new AtomicLong(100);
    for (int i = 0; i < 3; i++) {
      String answer =
          executor.execute(
              KEY,
              FP,
              Duration.ZERO,
              TEXT,
              token -> {
                runs.incrementAndGet();
                assertThat(balance.get()).isEqualTo(100); // not applied before the completion
                return IdempotentExecutor.Outcome.withEffect(
                    "debited 30", (Runnable) () -> balance.addAndGet(-30));
              });
      assertThat(answer).isEqualTo("debited 30");
    }
    assertThat(balance).hasValue(70);
    assertThat(runs).hasValue(1);
  }

  @Test
  void aRefusedEffectAppliesNothingAndReleasesTheKeySoThatARetryRuns() throws Exception {
    executor = IdempotentExecutor.builder(realTime).build();
    AtomicLong balance = new AtomicLong(10);
    Runnable overdraw =
        () -> {
          if (balance.get() < 30) {
            throw new IllegalStateException("insufficient funds");
          }
          balance.addAndGet(-30);
        };
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    Duration.ZERO,
                    TEXT,
                    token -> {
                      runs.incrementAndGet();
                      return IdempotentExecutor.Outcome.withEffect("debited", overdraw);
                    }))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("insufficient funds");
    assertThat(realTime.currentToken(KEY)).isZero(); // released
    balance.set(50);
    assertThat(
            executor.execute(
                KEY,
                FP,
                Duration.ZERO,
                TEXT,
                token -> {
                  runs.incrementAndGet();
                  return IdempotentExecutor.Outcome.withEffect("debited", overdraw);
                }))
        .isEqualTo("debited");
    assertThat(balance).hasValue(20);
    assertThat(runs).hasValue(2);
  }

  @Test
  void aStoreWithoutEffectsRefusesOneAndReleasesTheKey() throws Exception {
    CoreKeyStore inner = realTime;
    io.idem.keys.spi.KeyStore<Runnable> plain =
        new io.idem.keys.spi.KeyStore<>() { // only the SPI's required methods: no effects
          @Override
          public java.util.concurrent.CompletionStage<io.idem.keys.spi.Acquisition> acquire(
              IdempotencyKey k, Fingerprint f, Duration t, Duration r) {
            return inner.acquire(k, f, t, r);
          }

          @Override
          public java.util.concurrent.CompletionStage<io.idem.keys.spi.Settlement> complete(
              IdempotencyKey k, long token, byte[] response) {
            return inner.complete(k, token, response);
          }

          @Override
          public java.util.concurrent.CompletionStage<io.idem.keys.spi.Settlement> release(
              IdempotencyKey k, long token) {
            return inner.release(k, token);
          }

          @Override
          public java.util.concurrent.CompletionStage<io.idem.keys.spi.Settlement> renew(
              IdempotencyKey k, long token, Duration extension) {
            return inner.renew(k, token, extension);
          }
        };
    executor = IdempotentExecutor.builder(plain).build();
    assertThatThrownBy(
            () ->
                executor.execute(
                    KEY,
                    FP,
                    Duration.ZERO,
                    TEXT,
                    token -> IdempotentExecutor.Outcome.withEffect("x", (Runnable) () -> {})))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("cannot apply an effect");
    assertThat(inner.currentToken(KEY)).isZero();
    // Without an effect, the same store completes as before.
    assertThat(
            executor.execute(
                KEY, FP, Duration.ZERO, TEXT, token -> IdempotentExecutor.Outcome.of("plain")))
        .isEqualTo("plain");
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
