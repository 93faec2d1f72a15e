package io.idem.keys.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.IdempotentExecutor;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.KeyStoreException;
import io.idem.keys.StoredFailureException;
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
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The {@link KeyStore} contract as tests: every store (Idem, Redis, PostgreSQL, and the in-JVM
 * reference over idem-core's {@code KeyTable}) extends this class and runs the same cases with the
 * same expected outcomes. Published in idem-keys' test-jar.
 *
 * <p>A subclass gives {@link #store()} and {@link #unreachableStore()}; it starts and stops its
 * server itself (typically in {@code @BeforeAll}/{@code @AfterAll}). Every case works in a scope of
 * its own, so one store instance may serve them all. Cases that wait past a deadline use {@link
 * #shortTimeout()} and poll the store (bounded) rather than sleeping on the test's clock, because
 * the store's clock decides.
 */
@Timeout(120)
public abstract class KeyStoreContract {

  /** The longest any polling case waits for the store's clock to pass a deadline or a retention. */
  protected static final Duration POLL_BOUND = Duration.ofSeconds(30);

  private static final Duration LONG = Duration.ofMinutes(5);
  private static final Duration HOUR = Duration.ofHours(1);
  private static final Fingerprint FP = Fingerprint.of(utf8("amount=10"));
  private static final Fingerprint OTHER = Fingerprint.of(utf8("amount=99"));

  private final String scope = "contract-" + UUID.randomUUID();

  /** The store under test. The same instance may be returned to every case. */
  protected abstract KeyStore<?> store();

  /**
   * A store of the same kind whose server cannot be reached (stopped, or nothing listens on its
   * address), answering within a few seconds. The subclass owns and closes it.
   */
  protected abstract KeyStore<?> unreachableStore();

  /** The largest response the store accepts; one byte more is refused. Default 64 KiB. */
  protected int maxResponseBytes() {
    return 64 * 1024;
  }

  /**
   * An in-progress timeout short enough for cases that wait past a deadline, long enough for two
   * store calls in a row on a loaded machine. Default 300 ms.
   */
  protected Duration shortTimeout() {
    return Duration.ofMillis(300);
  }

  // ---- acquire, in progress, mismatch ----

  @Test
  void aNewKeyIsAcquiredAndASecondAcquireSeesTheOwnersDeadline() {
    IdempotencyKey k = key("new");
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertThat(a.token()).isPositive();
    assertThat(a.deadlineMs()).isPositive();
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.InProgress(a.deadlineMs()));
    assertThat(acquire(k, FP, Duration.ofMillis(1))).isEqualTo(inProgress(a));
  }

  @Test
  void anotherFingerprintIsAMismatchWhileInProgressAndAfterCompletion() {
    IdempotencyKey k = key("mismatch");
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertThat(acquire(k, OTHER, LONG)).isEqualTo(new Acquisition.Mismatch());
    assertThat(acquire(k, Fingerprint.none(), LONG)).isEqualTo(new Acquisition.Mismatch());
    assertThat(join(store().complete(k, a.token(), utf8("paid")))).isEqualTo(done());
    assertThat(acquire(k, OTHER, LONG)).isEqualTo(new Acquisition.Mismatch());
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(utf8("paid")));
  }

  // ---- complete and replay ----

  @Test
  void aCompletedKeyReplaysItsResponseByteExact() {
    IdempotencyKey k = key("replay");
    byte[] every = new byte[256 * 3];
    for (int i = 0; i < every.length; i++) {
      every[i] = (byte) i; // every byte value, NUL and 0xFF included
    }
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertThat(join(store().complete(k, a.token(), every))).isEqualTo(done());
    for (int i = 0; i < 3; i++) {
      Acquisition r = acquire(k, FP, LONG);
      assertThat(r).isInstanceOf(Acquisition.Completed.class);
      assertThat(((Acquisition.Completed) r).response()).containsExactly(every);
    }
    IdempotencyKey empty = key("empty-response");
    Acquisition.Acquired e = acquired(acquire(empty, FP, LONG));
    assertThat(join(store().complete(empty, e.token(), new byte[0]))).isEqualTo(done());
    assertThat(acquire(empty, FP, LONG)).isEqualTo(new Acquisition.Completed(new byte[0]));
  }

  @Test
  void theLargestResponseIsStoredAndOneByteMoreIsAnIllegalArgumentThatChangesNothing() {
    IdempotencyKey k = key("size");
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    byte[] tooBig = new byte[maxResponseBytes() + 1];
    assertRefused(store().complete(k, a.token(), tooBig), "response");
    assertThat(acquire(k, FP, LONG)).isEqualTo(inProgress(a));
    byte[] largest = new byte[maxResponseBytes()];
    largest[largest.length - 1] = 7;
    assertThat(join(store().complete(k, a.token(), largest))).isEqualTo(done());
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(largest));
  }

  @Test
  void anOwnersCompleteReleaseOrRenewOfACompletedKeyAnswersTheStoredOutcomeAndChangesNothing() {
    IdempotencyKey k = key("completed");
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertThat(join(store().complete(k, a.token(), utf8("first")))).isEqualTo(done());
    Settlement first = new Settlement.Completed(utf8("first"));
    assertThat(join(store().release(k, a.token()))).isEqualTo(first);
    assertThat(join(store().renew(k, a.token(), LONG))).isEqualTo(first);
    assertThat(join(store().complete(k, a.token(), utf8("second")))).isEqualTo(first);
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(utf8("first")));
  }

  // ---- takeover and fencing ----

  @Test
  void afterTheDeadlineATakeoverGetsAGreaterTokenAndTheOldOwnerIsFencedChangingNothing() {
    IdempotencyKey k = key("takeover");
    Acquisition.Acquired old = acquired(acquire(k, FP, shortTimeout()));
    Acquisition.Acquired taken = acquireWhen(k, FP, LONG, a -> a instanceof Acquisition.Acquired);
    assertThat(taken.token()).isGreaterThan(old.token());

    Settlement fenced = new Settlement.Fenced(taken.token());
    assertThat(join(store().renew(k, old.token(), HOUR))).isEqualTo(fenced);
    assertThat(join(store().complete(k, old.token(), utf8("stale")))).isEqualTo(fenced);
    assertThat(join(store().release(k, old.token()))).isEqualTo(fenced);
    // Nothing changed: the new owner still holds the key until its own deadline.
    assertThat(acquire(k, FP, LONG)).isEqualTo(inProgress(taken));

    assertThat(join(store().complete(k, taken.token(), utf8("fresh")))).isEqualTo(done());
    // The old owner learns that the key was completed, and with what: not "someone holds it".
    Settlement completed = new Settlement.Completed(utf8("fresh"));
    assertThat(join(store().complete(k, old.token(), utf8("stale")))).isEqualTo(completed);
    assertThat(join(store().release(k, old.token()))).isEqualTo(completed);
    assertThat(join(store().renew(k, old.token(), HOUR))).isEqualTo(completed);
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(utf8("fresh")));
  }

  @Test
  void anOwnerPastItsDeadlineWhomNobodyTookOverStillCompletes() {
    IdempotencyKey k = key("late");
    Acquisition.Acquired a = acquired(acquire(k, FP, Duration.ofMillis(1)));
    pause(shortTimeout());
    assertThat(join(store().complete(k, a.token(), utf8("late")))).isEqualTo(done());
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(utf8("late")));
  }

  @Test
  void aReleasedKeyIsAcquiredAgainWithAGreaterTokenAndItsFingerprintIsForgotten() {
    IdempotencyKey k = key("release");
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertThat(join(store().release(k, a.token()))).isEqualTo(done());
    assertThat(join(store().release(k, a.token()))).isEqualTo(new Settlement.Fenced(0));
    Acquisition.Acquired b = acquired(acquire(k, OTHER, LONG));
    assertThat(b.token()).isGreaterThan(a.token());
    assertThat(join(store().complete(k, a.token(), utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(b.token()));
    assertThat(join(store().release(k, b.token()))).isEqualTo(done());
    Acquisition.Acquired c = acquired(acquire(k, FP, LONG));
    assertThat(c.token()).isGreaterThan(b.token());
  }

  @Test
  void aRenewMovesTheDeadlineAndNoTakeoverHappensBeforeIt() {
    IdempotencyKey k = key("renew");
    Acquisition.Acquired a = acquired(acquire(k, FP, shortTimeout()));
    Settlement s = join(store().renew(k, a.token(), Duration.ofMinutes(2)));
    assertThat(s).isInstanceOf(Settlement.Done.class);
    long renewed = ((Settlement.Done) s).deadlineMs();
    assertThat(renewed).isGreaterThan(a.deadlineMs());
    pause(shortTimeout().multipliedBy(3)); // well past the first deadline, far from the renewed one
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.InProgress(renewed));
    assertThat(join(store().complete(k, a.token(), utf8("done")))).isEqualTo(done());
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(utf8("done")));
  }

  @Test
  void tokensGrowAcrossKeysAndEveryAcquireOfOneKey() {
    long last = 0;
    for (int i = 0; i < 20; i++) {
      IdempotencyKey k = key("grow-" + (i % 3));
      Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
      assertThat(a.token()).isGreaterThan(last);
      last = a.token();
      assertThat(join(store().release(k, a.token()))).isEqualTo(done());
    }
  }

  // ---- retention ----

  @Test
  void afterAnInProgressRecordExpiredTheNewRecordsTokenIsGreaterAndTheStaleOneIsFenced() {
    IdempotencyKey k = key("expired");
    Acquisition.Acquired old =
        acquired(store().acquire(k, FP, shortTimeout(), shortTimeout()).toCompletableFuture());
    // Another fingerprint is a mismatch until the record is gone (not a mere takeover).
    Acquisition.Acquired fresh =
        acquireWhen(k, OTHER, LONG, a -> !(a instanceof Acquisition.Mismatch));
    assertThat(fresh.token()).isGreaterThan(old.token());
    assertThat(join(store().complete(k, old.token(), utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(fresh.token()));
    assertThat(join(store().renew(k, old.token(), HOUR)))
        .isEqualTo(new Settlement.Fenced(fresh.token()));
    assertThat(acquire(k, OTHER, LONG)).isEqualTo(inProgress(fresh));
  }

  @Test
  void aCompletedRecordIsForgottenAfterItsRetentionAndTheKeyStartsAnew() {
    IdempotencyKey k = key("retention");
    Acquisition.Acquired old =
        acquired(store().acquire(k, FP, LONG, shortTimeout()).toCompletableFuture());
    assertThat(join(store().complete(k, old.token(), utf8("old")))).isEqualTo(done());
    Acquisition.Acquired fresh =
        acquireWhen(k, OTHER, LONG, a -> !(a instanceof Acquisition.Mismatch));
    assertThat(fresh.token()).isGreaterThan(old.token());
    assertThat(join(store().complete(k, old.token(), utf8("stale"))))
        .isEqualTo(new Settlement.Fenced(fresh.token()));
  }

  // ---- scopes and bounds ----

  @Test
  void scopesIsolateKeysEvenWhenTheirPartsLookAlike() {
    String base = scope;
    IdempotencyKey x = new IdempotencyKey(base + ":a", "b");
    IdempotencyKey y = new IdempotencyKey(base, "a:b");
    IdempotencyKey z = new IdempotencyKey(base + "-other", "a:b");
    Acquisition.Acquired ax = acquired(acquire(x, FP, LONG));
    Acquisition.Acquired ay = acquired(acquire(y, OTHER, LONG));
    Acquisition.Acquired az = acquired(acquire(z, Fingerprint.none(), LONG));
    assertThat(join(store().complete(y, ay.token(), utf8("y")))).isEqualTo(done());
    assertThat(acquire(x, FP, LONG)).isEqualTo(inProgress(ax));
    assertThat(acquire(z, Fingerprint.none(), LONG)).isEqualTo(inProgress(az));
    assertThat(join(store().complete(x, ay.token(), utf8("wrong"))))
        .isEqualTo(new Settlement.Fenced(ax.token()));
    assertThat(acquire(y, OTHER, LONG)).isEqualTo(new Acquisition.Completed(utf8("y")));
    IdempotencyKey noScope = new IdempotencyKey("", scope);
    assertThat(acquire(noScope, FP, LONG)).isInstanceOf(Acquisition.Acquired.class);
  }

  @Test
  void theLongestScopeAndKeyWorkAndLongerOnesAreIllegalArguments() {
    String longest = "ü".repeat(IdempotencyKey.MAX_CHARS - 36) + UUID.randomUUID();
    IdempotencyKey k = new IdempotencyKey(longest, longest);
    assertThat(k.key()).hasSize(IdempotencyKey.MAX_CHARS);
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertThat(join(store().complete(k, a.token(), utf8("long")))).isEqualTo(done());
    assertThat(acquire(k, FP, LONG)).isEqualTo(new Acquisition.Completed(utf8("long")));
    String tooLong = "k".repeat(IdempotencyKey.MAX_CHARS + 1);
    assertThatThrownBy(() -> new IdempotencyKey(scope, tooLong))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("key");
    assertThatThrownBy(() -> new IdempotencyKey(tooLong, "k"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("scope");
  }

  @Test
  void durationsOutOfBoundsAreIllegalArgumentsThatChangeNothing() {
    IdempotencyKey k = key("bounds");
    Duration month = Duration.ofDays(30);
    assertRefused(store().acquire(k, FP, month, HOUR), "");
    assertRefused(store().acquire(k, FP, LONG, month), "");
    assertRefused(store().acquire(k, FP, Duration.ZERO, HOUR), "");
    Acquisition.Acquired a = acquired(acquire(k, FP, LONG));
    assertRefused(store().renew(k, a.token(), month), "");
    assertThat(acquire(k, FP, LONG)).isEqualTo(inProgress(a));
  }

  // ---- the executor over the store ----

  @Test
  void theExecutorRunsAKeyOnceAndReplaysItsResult() throws Exception {
    AtomicInteger runs = new AtomicInteger();
    try (IdempotentExecutor<?> ex = IdempotentExecutor.builder(store()).build()) {
      IdempotencyKey k = key("executor");
      List<String> answers = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        answers.add(
            ex.execute(
                k,
                FP,
                IdempotentExecutor.Codec.utf8(),
                token -> "paid with token " + token + ", run " + runs.incrementAndGet()));
      }
      assertThat(runs).hasValue(1);
      assertThat(answers).containsOnly(answers.get(0));
      assertThat(answers.get(0)).endsWith(", run 1");
    }
  }

  @Test
  void theExecutorRunsAFailedOperationAgainAndReplaysAStoredFailure() throws Exception {
    AtomicInteger runs = new AtomicInteger();
    try (IdempotentExecutor<?> ex =
        IdempotentExecutor.builder(store()).storeFailures(IllegalStateException.class).build()) {
      IdempotencyKey k = key("fails");
      IdempotentExecutor.Operation<String> flaky =
          token -> {
            if (runs.incrementAndGet() == 1) {
              throw new java.io.IOException("bank unreachable");
            }
            throw new IllegalStateException("card declined");
          };
      IdempotentExecutor.Codec<String> text = IdempotentExecutor.Codec.utf8();
      assertThatThrownBy(() -> ex.execute(k, FP, text, flaky)).hasMessage("bank unreachable");
      assertThatThrownBy(() -> ex.execute(k, FP, text, flaky)).hasMessage("card declined");
      assertThatThrownBy(() -> ex.execute(k, FP, text, flaky))
          .isInstanceOfSatisfying(
              StoredFailureException.class,
              e -> assertThat(e.failureType()).isEqualTo("java.lang.IllegalStateException"));
      assertThat(runs).hasValue(2);
    }
  }

  @Test
  void concurrentDuplicatesWaitForTheOneRunOrFailAtOnce() throws Exception {
    AtomicInteger runs = new AtomicInteger();
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try (IdempotentExecutor<?> ex =
        IdempotentExecutor.builder(store()).waitForResult(Duration.ofSeconds(30)).build()) {
      IdempotencyKey k = key("duplicates");
      List<Future<String>> calls = new ArrayList<>();
      for (int i = 0; i < 4; i++) {
        calls.add(
            pool.submit(
                () ->
                    ex.execute(
                        k,
                        FP,
                        IdempotentExecutor.Codec.utf8(),
                        token -> {
                          Thread.sleep(300);
                          return "run " + runs.incrementAndGet();
                        })));
      }
      for (Future<String> f : calls) {
        assertThat(f.get(60, TimeUnit.SECONDS)).isEqualTo("run 1");
      }
      assertThat(runs).hasValue(1);
    } finally {
      pool.shutdownNow();
    }
    try (IdempotentExecutor<?> ex = IdempotentExecutor.builder(store()).build()) {
      IdempotencyKey k = key("held");
      acquired(acquire(k, FP, LONG));
      assertThatThrownBy(
              () -> ex.execute(k, FP, IdempotentExecutor.Codec.utf8(), t -> "" + runs.get()))
          .isInstanceOf(KeyInProgressException.class);
      assertThat(runs).hasValue(1);
    }
  }

  @Test
  void anUnreachableStoreIsNeverAYes() {
    IdempotencyKey k = key("unreachable");
    KeyStore<?> lost = unreachableStore();
    assertThatThrownBy(() -> join(lost.acquire(k, FP, LONG, HOUR)))
        .isInstanceOf(CompletionException.class)
        .hasCauseInstanceOf(KeyStoreException.class);
    assertThatThrownBy(() -> join(lost.complete(k, 1, utf8("x"))))
        .hasCauseInstanceOf(KeyStoreException.class);
    AtomicInteger runs = new AtomicInteger();
    try (IdempotentExecutor<?> ex = IdempotentExecutor.builder(lost).build()) {
      assertThatThrownBy(
              () ->
                  ex.execute(
                      k, FP, IdempotentExecutor.Codec.utf8(), t -> "" + runs.incrementAndGet()))
          .isInstanceOf(KeyStoreException.class);
    }
    assertThat(runs).hasValue(0);
  }

  // ---- helpers ----

  /** A key in this case's own scope. */
  protected IdempotencyKey key(String name) {
    return new IdempotencyKey(scope, name);
  }

  protected static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  protected static <T> T join(CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }

  private Acquisition acquire(IdempotencyKey k, Fingerprint fp, Duration timeout) {
    return join(store().acquire(k, fp, timeout, HOUR));
  }

  private static Acquisition.Acquired acquired(Acquisition a) {
    assertThat(a).isInstanceOf(Acquisition.Acquired.class);
    return (Acquisition.Acquired) a;
  }

  private static Acquisition.Acquired acquired(CompletionStage<Acquisition> s) {
    return acquired(join(s));
  }

  private static Acquisition inProgress(Acquisition.Acquired owner) {
    return new Acquisition.InProgress(owner.deadlineMs());
  }

  private static Settlement done() {
    return new Settlement.Done(0);
  }

  /** Acquires until {@code until} holds of the answer (bounded by {@link #POLL_BOUND}). */
  private Acquisition.Acquired acquireWhen(
      IdempotencyKey k, Fingerprint fp, Duration timeout, Predicate<Acquisition> until) {
    long end = System.nanoTime() + POLL_BOUND.toNanos();
    while (true) {
      Acquisition a = acquire(k, fp, timeout);
      if (until.test(a)) {
        return acquired(a);
      }
      assertThat(System.nanoTime()).as("still %s after %s", a, POLL_BOUND).isLessThan(end);
      pause(Duration.ofMillis(25));
    }
  }

  private static void assertRefused(CompletionStage<?> stage, String mentioning) {
    assertThatThrownBy(() -> join(stage))
        .isInstanceOf(CompletionException.class)
        .cause()
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(mentioning);
  }

  private static void pause(Duration d) {
    try {
      Thread.sleep(d.toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }
}
