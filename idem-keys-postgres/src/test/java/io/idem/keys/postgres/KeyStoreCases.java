package io.idem.keys.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyFencedException;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * The {@link KeyStore} contract's cases, written against the SPI only, so that they can move into
 * the shared contract class of idem-keys' test-jar as they are. A subclass gives {@link #store()};
 * every case works in a scope of its own, so one store serves them all. Waits for the store's clock
 * poll the store, bounded by {@link #POLL_BOUND}.
 */
abstract class KeyStoreCases {
  static final Duration POLL_BOUND = Duration.ofSeconds(30);
  static final Duration MINUTE = Duration.ofMinutes(1);
  static final Duration HOUR = Duration.ofHours(1);
  static final Duration SHORT = Duration.ofMillis(300);
  static final Fingerprint FP = Fingerprint.of(utf8("pay 10 EUR to acct 7"));
  static final Fingerprint OTHER = Fingerprint.of(utf8("pay 99 EUR to acct 7"));

  final String scope = "case-" + UUID.randomUUID();

  /** The store under test. */
  abstract KeyStore store();

  /** The largest response the store takes. */
  abstract int maxResponseBytes();

  @Test
  void aNewKeyIsAcquiredAndADuplicateSeesTheOwnersDeadline() {
    IdempotencyKey k = key("new");
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertThat(a.token()).isPositive();
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
    // The duplicate's own timeout changes nothing.
    assertThat(acquire(k, FP, Duration.ofMillis(1)))
        .isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
  }

  @Test
  void anotherFingerprintIsAMismatchInProgressAndAfterCompletion() {
    IdempotencyKey k = key("mismatch");
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertThat(acquire(k, OTHER, MINUTE)).isEqualTo(new Acquisition.Mismatch());
    assertThat(acquire(k, Fingerprint.none(), MINUTE)).isEqualTo(new Acquisition.Mismatch());
    assertThat(join(store().complete(k, a.token(), utf8("receipt 1")))).isEqualTo(done());
    assertThat(acquire(k, OTHER, MINUTE)).isEqualTo(new Acquisition.Mismatch());
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.Completed(utf8("receipt 1")));
  }

  @Test
  void aCompletedKeyReplaysItsResponseByteForByte() {
    IdempotencyKey k = key("replay");
    byte[] response = new byte[1024];
    for (int i = 0; i < response.length; i++) {
      response[i] = (byte) (i * 7); // every byte value, 0x00 included
    }
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertThat(join(store().complete(k, a.token(), response))).isEqualTo(done());
    for (int i = 0; i < 2; i++) {
      Acquisition r = acquire(k, FP, MINUTE);
      assertThat(r).isInstanceOf(Acquisition.Completed.class);
      assertThat(((Acquisition.Completed) r).response()).containsExactly(response);
    }
    IdempotencyKey empty = key("empty");
    Acquisition.Acquired e = acquired(empty, FP, MINUTE);
    assertThat(join(store().complete(empty, e.token(), new byte[0]))).isEqualTo(done());
    assertThat(acquire(empty, FP, MINUTE)).isEqualTo(new Acquisition.Completed(new byte[0]));
  }

  @Test
  void settlingACompletedKeyIsFencedWithNoOwnerAndTheResponseStays() {
    IdempotencyKey k = key("settled");
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertThat(join(store().complete(k, a.token(), utf8("first")))).isEqualTo(done());
    assertThat(join(store().complete(k, a.token(), utf8("second"))))
        .isEqualTo(new Settlement.Fenced(0));
    assertThat(join(store().renew(k, a.token(), MINUTE))).isEqualTo(new Settlement.Fenced(0));
    assertThat(join(store().release(k, a.token()))).isEqualTo(new Settlement.Fenced(0));
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.Completed(utf8("first")));
  }

  @Test
  void aTakeoverAfterTheDeadlineHasAGreaterTokenAndTheStaleOwnerChangesNothing() {
    IdempotencyKey k = key("takeover");
    Acquisition.Acquired stale = acquired(k, FP, SHORT);
    Acquisition.Acquired owner = acquireUntil(k, FP, MINUTE, KeyStoreCases::inProgress);
    assertThat(owner.token()).isGreaterThan(stale.token());
    assertThat(owner.deadlineMs()).isGreaterThan(stale.deadlineMs());

    Settlement fenced = new Settlement.Fenced(owner.token());
    assertThat(join(store().complete(k, stale.token(), utf8("stale")))).isEqualTo(fenced);
    assertThat(join(store().renew(k, stale.token(), HOUR))).isEqualTo(fenced);
    assertThat(join(store().release(k, stale.token()))).isEqualTo(fenced);
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(owner.deadlineMs()));

    assertThat(join(store().complete(k, owner.token(), utf8("owner")))).isEqualTo(done());
    assertThat(join(store().complete(k, stale.token(), utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(0));
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.Completed(utf8("owner")));
  }

  @Test
  void anOwnerPastItsDeadlineStillCompletesWhileNobodyTookItOver() {
    IdempotencyKey k = key("late");
    Acquisition.Acquired a = acquired(k, FP, Duration.ofMillis(1));
    sleep(50);
    assertThat(join(store().complete(k, a.token(), utf8("late")))).isEqualTo(done());
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.Completed(utf8("late")));
  }

  @Test
  void aReleasedKeyIsAcquiredAgainWithAGreaterTokenAnyFingerprint() {
    IdempotencyKey k = key("released");
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertThat(join(store().release(k, a.token()))).isEqualTo(done());
    assertThat(join(store().release(k, a.token()))).isEqualTo(new Settlement.Fenced(0));
    Acquisition.Acquired b = acquired(k, OTHER, MINUTE);
    assertThat(b.token()).isGreaterThan(a.token());
    assertThat(join(store().complete(k, a.token(), utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(b.token()));
    assertThat(join(store().renew(k, a.token(), MINUTE)))
        .isEqualTo(new Settlement.Fenced(b.token()));
    assertThat(acquire(k, OTHER, MINUTE)).isEqualTo(new Acquisition.InProgress(b.deadlineMs()));
  }

  @Test
  void aRenewMovesTheDeadlineSoNobodyTakesTheKeyOverBeforeIt() {
    IdempotencyKey k = key("renew");
    Acquisition.Acquired a = acquired(k, FP, SHORT);
    Settlement s = join(store().renew(k, a.token(), MINUTE));
    assertThat(s).isInstanceOf(Settlement.Done.class);
    long renewed = ((Settlement.Done) s).deadlineMs();
    assertThat(renewed)
        .isGreaterThanOrEqualTo(a.deadlineMs() + MINUTE.toMillis() - SHORT.toMillis());
    sleep(SHORT.toMillis() * 2);
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(renewed));
    assertThat(join(store().complete(k, a.token(), utf8("kept")))).isEqualTo(done());
  }

  @Test
  void tokensGrowAcrossKeysTakeoversAndReleases() {
    long last = 0;
    for (int i = 0; i < 12; i++) {
      IdempotencyKey k = key("grow-" + (i % 3));
      Acquisition.Acquired a = acquired(k, FP, MINUTE);
      assertThat(a.token()).isGreaterThan(last);
      last = a.token();
      assertThat(join(store().release(k, a.token()))).isEqualTo(done());
    }
  }

  @Test
  void afterARecordExpiredTheKeyStartsAnewWithAGreaterTokenAndTheOldOneIsFenced() {
    IdempotencyKey k = key("expired");
    Acquisition.Acquired old = acquired(join(store().acquire(k, FP, SHORT, SHORT)));
    // Another fingerprint is a mismatch for as long as the record lives; then the key is new.
    Acquisition.Acquired fresh =
        acquireUntil(k, OTHER, MINUTE, a -> a instanceof Acquisition.Mismatch);
    assertThat(fresh.token()).isGreaterThan(old.token());
    assertThat(join(store().complete(k, old.token(), utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(fresh.token()));

    IdempotencyKey done = key("expired-completed");
    Acquisition.Acquired first = acquired(join(store().acquire(done, FP, MINUTE, SHORT)));
    assertThat(join(store().complete(done, first.token(), utf8("old")))).isEqualTo(done());
    Acquisition.Acquired again =
        acquireUntil(done, FP, MINUTE, a -> a instanceof Acquisition.Completed);
    assertThat(again.token()).isGreaterThan(first.token());
  }

  @Test
  void scopesIsolateKeys() {
    IdempotencyKey a = new IdempotencyKey(scope + "-a", "order-1");
    IdempotencyKey b = new IdempotencyKey(scope + "-b", "order-1");
    IdempotencyKey joined = new IdempotencyKey(scope + "-a\norder", "1");
    Acquisition.Acquired ta = acquired(a, FP, MINUTE);
    Acquisition.Acquired tb = acquired(b, OTHER, MINUTE);
    Acquisition.Acquired tj = acquired(joined, FP, MINUTE);
    assertThat(join(store().complete(a, ta.token(), utf8("a")))).isEqualTo(done());
    assertThat(acquire(b, OTHER, MINUTE)).isEqualTo(new Acquisition.InProgress(tb.deadlineMs()));
    assertThat(join(store().complete(b, ta.token(), utf8("x"))))
        .isEqualTo(new Settlement.Fenced(tb.token()));
    assertThat(acquire(joined, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(tj.deadlineMs()));
    assertThat(acquire(new IdempotencyKey("", scope + "/order-1"), FP, MINUTE))
        .isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void theLargestResponseFitsAndOneByteMoreIsRefusedChangingNothing() {
    IdempotencyKey k = key("size");
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertIllegal(store().complete(k, a.token(), new byte[maxResponseBytes() + 1]), "response");
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
    byte[] largest = new byte[maxResponseBytes()];
    largest[largest.length - 1] = 42;
    assertThat(join(store().complete(k, a.token(), largest))).isEqualTo(done());
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.Completed(largest));
  }

  @Test
  void theLongestKeysWorkAndDurationsOutOfBoundsAreRefused() {
    String longest = "é".repeat(IdempotencyKey.MAX_CHARS - 36) + UUID.randomUUID();
    IdempotencyKey k = new IdempotencyKey(longest, longest);
    Acquisition.Acquired a = acquired(k, FP, MINUTE);
    assertThat(join(store().complete(k, a.token(), utf8("long")))).isEqualTo(done());
    assertThat(acquire(k, FP, MINUTE)).isEqualTo(new Acquisition.Completed(utf8("long")));

    IdempotencyKey b = key("bounds");
    Duration tooLong = Duration.ofDays(30);
    assertIllegal(store().acquire(b, FP, tooLong, HOUR), "inProgressTimeout");
    assertIllegal(store().acquire(b, FP, MINUTE, tooLong), "retention");
    assertIllegal(store().acquire(b, FP, Duration.ZERO, HOUR), "inProgressTimeout");
    Acquisition.Acquired owner = acquired(b, FP, MINUTE);
    assertIllegal(store().renew(b, owner.token(), tooLong), "extension");
    assertThat(acquire(b, FP, MINUTE)).isEqualTo(new Acquisition.InProgress(owner.deadlineMs()));
  }

  // ---- the executor over the store: the standard mode ----

  @Test
  void theExecutorRunsOnceAndReplays() throws Exception {
    AtomicInteger runs = new AtomicInteger();
    List<Long> tokens = new ArrayList<>();
    try (IdempotentExecutor ex = IdempotentExecutor.builder(store()).build()) {
      IdempotencyKey k = key("executor");
      List<String> answers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        answers.add(
            ex.execute(
                k,
                FP,
                IdempotentExecutor.Codec.utf8(),
                token -> {
                  tokens.add(token);
                  return "shipped, run " + runs.incrementAndGet();
                }));
      }
      assertThat(answers).containsOnly("shipped, run 1");
      assertThat(tokens).hasSize(1);
    }
  }

  @Test
  void concurrentDuplicatesWaitForTheOneRun() throws Exception {
    AtomicInteger runs = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(6);
    CountDownLatch go = new CountDownLatch(1);
    try (IdempotentExecutor ex =
        IdempotentExecutor.builder(store()).waitForResult(Duration.ofSeconds(30)).build()) {
      IdempotencyKey k = key("duplicates");
      List<Future<String>> calls = new ArrayList<>();
      for (int i = 0; i < 6; i++) {
        calls.add(
            pool.submit(
                () -> {
                  go.await();
                  return ex.execute(
                      k,
                      FP,
                      IdempotentExecutor.Codec.utf8(),
                      token -> {
                        Thread.sleep(300);
                        return "run " + runs.incrementAndGet();
                      });
                }));
      }
      go.countDown();
      for (Future<String> f : calls) {
        assertThat(f.get(60, TimeUnit.SECONDS)).isEqualTo("run 1");
      }
      assertThat(runs).hasValue(1);
    } finally {
      pool.shutdownNow();
    }
    try (IdempotentExecutor ex = IdempotentExecutor.builder(store()).build()) {
      IdempotencyKey held = key("held");
      acquired(held, FP, MINUTE);
      assertThatThrownBy(
              () ->
                  ex.execute(
                      held, FP, IdempotentExecutor.Codec.utf8(), t -> "" + runs.incrementAndGet()))
          .isInstanceOf(KeyInProgressException.class);
      assertThat(runs).hasValue(1);
    }
  }

  @Test
  void anExecutorOwnerTakenOverIsFencedAndItsOutcomeIsNotStored() throws Exception {
    IdempotencyKey k = key("stale-executor");
    CountDownLatch running = new CountDownLatch(1);
    CountDownLatch takenOver = new CountDownLatch(1);
    try (IdempotentExecutor ex =
        IdempotentExecutor.builder(store())
            .inProgressTimeout(SHORT)
            .renewEvery(Duration.ZERO)
            .build()) {
      ExecutorService one = Executors.newSingleThreadExecutor();
      try {
        Future<String> stale =
            one.submit(
                () ->
                    ex.execute(
                        k,
                        FP,
                        IdempotentExecutor.Codec.utf8(),
                        token -> {
                          running.countDown();
                          takenOver.await(); // paused past its deadline (no renewals)
                          return "stale";
                        }));
        assertThat(running.await(30, TimeUnit.SECONDS)).isTrue();
        Acquisition.Acquired owner = acquireUntil(k, FP, MINUTE, KeyStoreCases::inProgress);
        takenOver.countDown();
        assertThatThrownBy(() -> stale.get(30, TimeUnit.SECONDS))
            .hasCauseInstanceOf(KeyFencedException.class);
        assertThat(acquire(k, FP, MINUTE))
            .isEqualTo(new Acquisition.InProgress(owner.deadlineMs()));
      } finally {
        one.shutdownNow();
      }
    }
  }

  // ---- helpers ----

  IdempotencyKey key(String name) {
    return new IdempotencyKey(scope, name);
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static <T> T join(CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }

  static Settlement done() {
    return new Settlement.Done(0);
  }

  Acquisition acquire(IdempotencyKey k, Fingerprint fp, Duration timeout) {
    return join(store().acquire(k, fp, timeout, HOUR));
  }

  Acquisition.Acquired acquired(IdempotencyKey k, Fingerprint fp, Duration timeout) {
    return acquired(acquire(k, fp, timeout));
  }

  static Acquisition.Acquired acquired(Acquisition a) {
    assertThat(a).isInstanceOf(Acquisition.Acquired.class);
    return (Acquisition.Acquired) a;
  }

  /**
   * Acquires {@code k} every 20 ms until it is acquired; every answer before must be one that
   * {@code whileWaiting} accepts. Fails after {@link #POLL_BOUND}.
   */
  Acquisition.Acquired acquireUntil(
      IdempotencyKey k, Fingerprint fp, Duration timeout, Predicate<Acquisition> whileWaiting) {
    long end = System.nanoTime() + POLL_BOUND.toNanos();
    while (true) {
      Acquisition a = acquire(k, fp, timeout);
      if (a instanceof Acquisition.Acquired owned) {
        return owned;
      }
      assertThat(a).as("an answer while waiting to acquire %s", k).matches(whileWaiting);
      assertThat(System.nanoTime()).as("still %s after %s", a, POLL_BOUND).isLessThan(end);
      sleep(20);
    }
  }

  static boolean inProgress(Acquisition a) {
    return a instanceof Acquisition.InProgress;
  }

  static void assertIllegal(CompletionStage<?> stage, String mentioning) {
    assertThatThrownBy(() -> join(stage))
        .isInstanceOf(CompletionException.class)
        .cause()
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(mentioning);
  }

  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }
}
