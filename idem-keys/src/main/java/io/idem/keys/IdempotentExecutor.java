package io.idem.keys;

import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * Runs a business operation at most once per idempotency key, and replays its outcome to every
 * retry: acquire the key, run, store the outcome, replay. A concurrent duplicate either waits for
 * the outcome (bounded) or fails at once with {@link KeyInProgressException}, as the builder says.
 * A long operation keeps its key by renewing it. A failure releases the key (the step did nothing;
 * a retry runs it again) unless its type was chosen to be stored as the final outcome. The
 * operation receives its fencing token, to pass to writes the store can fence (on Idem, a fenced KV
 * write is refused once another owner took the key over).
 *
 * <p>Thread-safe; one executor serves any number of keys and threads. Close it to stop its renewal
 * thread.
 *
 * @param <E> the store's effect type (see {@link KeyStore}): an {@link EffectfulOperation} hands
 *     back effects of this type only, so an operation written for another store does not compile
 */
public final class IdempotentExecutor<E> implements AutoCloseable {

  /** Default {@link Builder#inProgressTimeout}: 30 s. */
  public static final Duration DEFAULT_IN_PROGRESS_TIMEOUT = Duration.ofSeconds(30);

  /** Default {@link Builder#retention}: 24 h. */
  public static final Duration DEFAULT_RETENTION = Duration.ofHours(24);

  /** Default {@link Builder#storeTimeout}: 10 s. */
  public static final Duration DEFAULT_STORE_TIMEOUT = Duration.ofSeconds(10);

  /** How often a waiting duplicate asks the store again. */
  public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofMillis(50);

  /** The business operation. It gets the fencing token of its ownership of the key. */
  @FunctionalInterface
  public interface Operation<T> {
    /** Runs once per key (unless it fails and its failure is not stored). */
    T run(long fencingToken) throws Exception;
  }

  /**
   * A business operation whose deciding write the store applies together with the completion (see
   * {@link KeyStore#completeWith}): it returns its result and that write as an {@link Outcome}.
   * {@code E} is the store's effect type.
   */
  @FunctionalInterface
  public interface EffectfulOperation<T, E> {
    /** Runs once per key (unless it fails and its failure is not stored). */
    Outcome<T, E> run(long fencingToken) throws Exception;
  }

  /**
   * What an {@link EffectfulOperation} returns: its result, and the write the store applies in the
   * same atomic step as storing the result (null for none). The effect's type {@code E} is the
   * store's (on Idem, {@code io.idem.client.Write}; on Redis, {@code RedisEffect}).
   *
   * @param value the result, stored and replayed
   * @param effect the business write, or null
   */
  public record Outcome<T, E>(T value, @Nullable E effect) {
    /** A result without an effect. */
    public static <T, E> Outcome<T, E> of(T value) {
      return new Outcome<>(value, null);
    }

    /** A result whose {@code effect} lands with its completion, or not at all. */
    public static <T, E> Outcome<T, E> withEffect(T value, E effect) {
      if (effect == null) {
        throw new IllegalArgumentException("effect must not be null (use Outcome.of)");
      }
      return new Outcome<>(value, effect);
    }
  }

  /** Turns the operation's result into the stored response and back. */
  public interface Codec<T> {
    /** The bytes to store. */
    byte[] encode(T value);

    /** The value replayed from stored bytes. */
    T decode(byte[] bytes);

    /** UTF-8 text. */
    static Codec<String> utf8() {
      return new Codec<>() {
        @Override
        public byte[] encode(String value) {
          return value.getBytes(StandardCharsets.UTF_8);
        }

        @Override
        public String decode(byte[] bytes) {
          return new String(bytes, StandardCharsets.UTF_8);
        }
      };
    }
  }

  private final KeyStore<E> store;
  private final Duration inProgressTimeout;
  private final Duration retention;
  private final Duration waitForResult;
  private final Duration pollInterval;
  private final Duration storeTimeout;
  private final Duration renewEvery;
  private final List<Class<? extends Throwable>> storedFailures;
  private final ScheduledExecutorService renewals;

  private IdempotentExecutor(Builder<E> b) {
    this.store = b.store;
    this.inProgressTimeout = b.inProgressTimeout;
    this.retention = b.retention;
    this.waitForResult = b.waitForResult;
    this.pollInterval = b.pollInterval;
    this.storeTimeout = b.storeTimeout;
    this.renewEvery = b.renewEvery == null ? inProgressTimeout.dividedBy(3) : b.renewEvery;
    this.storedFailures = List.copyOf(b.storedFailures);
    AtomicInteger n = new AtomicInteger();
    this.renewals =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "idem-keys-renewal-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            });
  }

  /** A builder over {@code store}. */
  public static <E> Builder<E> builder(KeyStore<E> store) {
    return new Builder<>(store);
  }

  /**
   * Runs {@code operation} once for {@code key}, or replays the outcome stored for it.
   *
   * @return the operation's result, from this run or replayed
   * @throws KeyMismatchException the key was used with another fingerprint; nothing ran
   * @throws KeyInProgressException another owner holds the key and waiting was not chosen or ran
   *     out; nothing ran. Its {@link KeyInProgressException#retryAfter()} estimates when the
   *     owner's deadline passes
   * @throws KeyFencedException the operation ran, but another owner took the key over, or completed
   *     it ({@link KeyFencedException#completedByAnother()}), before its outcome was stored
   * @throws StoredFailureException a failure stored as the key's outcome, replayed
   * @throws KeyStoreFullException the store refused the key: a quota or the store's space is used
   *     up; nothing ran
   * @throws KeyStoreException the store failed; the outcome is unknown, and retrying with the same
   *     key is safe. An acquire that timed out here but lands later is released when its answer
   *     arrives, so the key is not left held by an owner that never runs
   * @throws Exception what the operation threw, when it ran here
   */
  public <T> T execute(
      IdempotencyKey key, Fingerprint fingerprint, Codec<T> codec, Operation<T> operation)
      throws Exception {
    return execute(
        key, fingerprint, waitForResult, codec, token -> Outcome.of(operation.run(token)));
  }

  /**
   * As {@link #execute(IdempotencyKey, Fingerprint, Codec, Operation)}, with this call's own bound
   * on waiting for a concurrent duplicate's outcome (zero fails at once with {@link
   * KeyInProgressException}; the builder's {@link Builder#waitForResult} is the other method's),
   * and an operation that may hand back an effect for the store to apply with the completion.
   *
   * <p>If the store refuses the effect (it fails the completion with anything but {@link
   * KeyStoreException}: a compare-and-set that no longer holds, a store without effects), nothing
   * was applied: the key is released, so that a retry runs again, and the refusal is thrown.
   *
   * @throws IllegalArgumentException {@code waitForResult} is null or negative
   */
  public <T> T execute(
      IdempotencyKey key,
      Fingerprint fingerprint,
      Duration waitForResult,
      Codec<T> codec,
      EffectfulOperation<T, E> operation)
      throws Exception {
    if (waitForResult == null || waitForResult.isNegative()) {
      throw new IllegalArgumentException(
          "waitForResult must be zero or positive, got " + waitForResult);
    }
    long waitUntil = System.nanoTime() + waitForResult.toNanos();
    while (true) {
      Acquisition a = acquire(key, fingerprint);
      if (a instanceof Acquisition.Acquired owned) {
        return run(key, owned.token(), codec, operation);
      }
      if (a instanceof Acquisition.Completed done) {
        return replay(key, codec, done.response());
      }
      if (a instanceof Acquisition.Mismatch) {
        throw new KeyMismatchException(key, "the key was used with another payload", null);
      }
      long left = waitUntil - System.nanoTime();
      if (left <= 0) {
        long deadline = ((Acquisition.InProgress) a).deadlineMs();
        throw new KeyInProgressException(
            key,
            "another owner holds the key until " + deadline + " (store time)",
            null,
            untilDeadline(deadline));
      }
      sleep(Math.min(left, pollInterval.toNanos()));
    }
  }

  /**
   * Asks the store for the key. If the answer does not come within the store timeout, the acquire
   * may still land; should its answer say the key is ours after all, the key is released then, so
   * that a retry is not told to wait for an owner that never runs.
   */
  private Acquisition acquire(IdempotencyKey key, Fingerprint fingerprint) {
    CompletableFuture<Acquisition> pending =
        store.acquire(key, fingerprint, inProgressTimeout, retention).toCompletableFuture();
    try {
      return pending.get(storeTimeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      throw storeFailure(key, e.getCause());
    } catch (TimeoutException e) {
      releaseIfLateOwner(key, pending);
      throw new KeyStoreException(key, "the store did not answer within " + storeTimeout, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      releaseIfLateOwner(key, pending);
      throw new KeyStoreException(key, "interrupted while waiting for the store", e);
    }
  }

  private void releaseIfLateOwner(IdempotencyKey key, CompletableFuture<Acquisition> pending) {
    pending.thenAccept(
        late -> {
          if (late instanceof Acquisition.Acquired owned) {
            store.release(key, owned.token());
          }
        });
  }

  /**
   * How long until {@code deadlineMs} (the store's clock) by this machine's clock: an estimate for
   * a retry's wait, never negative. The two clocks are both wall clocks; their skew is its error.
   */
  private static Duration untilDeadline(long deadlineMs) {
    return Duration.ofMillis(Math.max(0, deadlineMs - System.currentTimeMillis()));
  }

  private <T> T run(
      IdempotencyKey key, long token, Codec<T> codec, EffectfulOperation<T, E> operation)
      throws Exception {
    ScheduledFuture<?> renewing = renewEvery.isZero() ? null : renewPeriodically(key, token);
    Outcome<T, E> outcome;
    try {
      outcome = operation.run(token);
      if (outcome == null) {
        throw new IllegalStateException("the operation returned no Outcome");
      }
    } catch (Exception e) {
      if (renewing != null) {
        renewing.cancel(false);
      }
      if (stored(e)) {
        settle(key, store.complete(key, token, StoredOutcomes.failure(e)));
      } else {
        try {
          await(key, store.release(key, token));
        } catch (KeyStoreException storeFailed) {
          // The key stays owned until its deadline, then anyone may take it over.
          e.addSuppressed(storeFailed);
        }
      }
      throw e;
    }
    if (renewing != null) {
      renewing.cancel(false);
    }
    byte[] response = StoredOutcomes.success(codec.encode(outcome.value()));
    if (outcome.effect() == null) {
      settle(key, store.complete(key, token, response));
    } else {
      settleWithEffect(key, token, response, outcome.effect());
    }
    return outcome.value();
  }

  private void settleWithEffect(IdempotencyKey key, long token, byte[] response, E effect)
      throws Exception {
    Throwable refused;
    try {
      checkSettled(
          key,
          store
              .completeWith(key, token, response, effect)
              .toCompletableFuture()
              .get(storeTimeout.toNanos(), TimeUnit.NANOSECONDS));
      return;
    } catch (ExecutionException e) {
      refused = e.getCause() instanceof CompletionException c ? c.getCause() : e.getCause();
      if (refused == null) {
        refused = e;
      }
      if (refused instanceof KeyStoreException || refused instanceof KeyStoreFullException) {
        throw (KeyException) refused;
      }
    } catch (RuntimeException e) {
      if (e instanceof KeyException) {
        throw e;
      }
      refused = e; // thrown by completeWith itself rather than through its stage
    } catch (TimeoutException e) {
      throw new KeyStoreException(key, "the store did not answer within " + storeTimeout, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KeyStoreException(key, "interrupted while waiting for the store", e);
    }
    // The store refused the effect: nothing was applied and the key is still ours. Release it, so
    // that a retry runs again.
    try {
      await(key, store.release(key, token));
    } catch (KeyStoreException storeFailed) {
      refused.addSuppressed(storeFailed); // the key stays owned until its deadline
    }
    if (refused instanceof Exception e) {
      throw e;
    }
    throw (Error) refused;
  }

  private ScheduledFuture<?> renewPeriodically(IdempotencyKey key, long token) {
    long ms = Math.max(1, renewEvery.toMillis());
    return renewals.scheduleWithFixedDelay(
        () -> store.renew(key, token, inProgressTimeout), ms, ms, TimeUnit.MILLISECONDS);
  }

  private void settle(IdempotencyKey key, CompletionStage<Settlement> stage) {
    checkSettled(key, await(key, stage));
  }

  private static void checkSettled(IdempotencyKey key, Settlement s) {
    if (s instanceof Settlement.Fenced f) {
      throw new KeyFencedException(
          key,
          f.current() == 0
              ? "the key is no longer held (released, or expired after its retention) and this"
                  + " outcome was not stored"
              : "another owner (token "
                  + f.current()
                  + ") took the key over before this outcome was stored; it was not stored",
          null);
    }
    if (s instanceof Settlement.Completed c) {
      throw new KeyFencedException(
          key,
          "another owner completed the key first; its outcome stands and is what retries replay,"
              + " and this run's outcome was not stored",
          null,
          c.response());
    }
  }

  private boolean stored(Exception e) {
    for (Class<? extends Throwable> c : storedFailures) {
      if (c.isInstance(e)) {
        return true;
      }
    }
    return false;
  }

  private static <T> T replay(IdempotencyKey key, Codec<T> codec, byte[] response) {
    return StoredOutcomes.replay(key, codec, response);
  }

  private <R> R await(IdempotencyKey key, CompletionStage<R> stage) {
    try {
      return stage.toCompletableFuture().get(storeTimeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      throw storeFailure(key, e.getCause());
    } catch (TimeoutException e) {
      throw new KeyStoreException(key, "the store did not answer within " + storeTimeout, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KeyStoreException(key, "interrupted while waiting for the store", e);
    }
  }

  /** A store's failure as the executor throws it: the store's own key exceptions as they are. */
  private static KeyException storeFailure(IdempotencyKey key, @Nullable Throwable c) {
    if (c instanceof CompletionException && c.getCause() != null) {
      c = c.getCause();
    }
    if (c instanceof KeyStoreException || c instanceof KeyStoreFullException) {
      return (KeyException) c;
    }
    return new KeyStoreException(key, "the store failed: " + c, c);
  }

  private static void sleep(long nanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(nanos);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KeyInProgressException(null, "interrupted while waiting for the result", e);
    }
  }

  /** Stops the renewal thread; operations still running lose their renewals. */
  @Override
  public void close() {
    renewals.shutdownNow();
  }

  /** Builds an {@link IdempotentExecutor}. Not thread-safe. */
  public static final class Builder<E> {
    private final KeyStore<E> store;
    private Duration inProgressTimeout = DEFAULT_IN_PROGRESS_TIMEOUT;
    private Duration retention = DEFAULT_RETENTION;
    private Duration waitForResult = Duration.ZERO;
    private Duration pollInterval = DEFAULT_POLL_INTERVAL;
    private Duration storeTimeout = DEFAULT_STORE_TIMEOUT;
    private @Nullable Duration renewEvery;
    private final List<Class<? extends Throwable>> storedFailures = new ArrayList<>();

    private Builder(KeyStore<E> store) {
      if (store == null) {
        throw new IllegalArgumentException("store must not be null");
      }
      this.store = store;
    }

    /** How long an owner holds a key without renewing it. Default 30 s. */
    public Builder<E> inProgressTimeout(Duration d) {
      this.inProgressTimeout = positive("inProgressTimeout", d);
      return this;
    }

    /** How long an outcome is kept (and replayed). Default 24 h. */
    public Builder<E> retention(Duration d) {
      this.retention = positive("retention", d);
      return this;
    }

    /**
     * A concurrent duplicate waits up to {@code d} for the outcome (asking the store every {@link
     * #pollInterval}); zero, the default, fails it at once with {@link KeyInProgressException}.
     */
    public Builder<E> waitForResult(Duration d) {
      if (d == null || d.isNegative()) {
        throw new IllegalArgumentException("waitForResult must be zero or positive, got " + d);
      }
      this.waitForResult = d;
      return this;
    }

    /** How often a waiting duplicate asks again. Default 50 ms. */
    public Builder<E> pollInterval(Duration d) {
      this.pollInterval = positive("pollInterval", d);
      return this;
    }

    /** How long one store call may take before it counts as failed. Default 10 s. */
    public Builder<E> storeTimeout(Duration d) {
      this.storeTimeout = positive("storeTimeout", d);
      return this;
    }

    /**
     * How often a running operation renews its key; zero turns renewal off. Default a third of the
     * in-progress timeout.
     */
    public Builder<E> renewEvery(Duration d) {
      if (d == null || d.isNegative()) {
        throw new IllegalArgumentException("renewEvery must be zero or positive, got " + d);
      }
      this.renewEvery = d;
      return this;
    }

    /**
     * Failures of these types are the operation's final outcome: stored and replayed as {@link
     * StoredFailureException}, never run again. Other failures release the key.
     */
    @SafeVarargs
    public final Builder<E> storeFailures(Class<? extends Throwable>... types) {
      for (Class<? extends Throwable> t : types) {
        storedFailures.add(t);
      }
      return this;
    }

    /** The executor. */
    public IdempotentExecutor<E> build() {
      if (renewEvery != null && renewEvery.compareTo(inProgressTimeout) >= 0) {
        throw new IllegalArgumentException(
            "renewEvery " + renewEvery + " must be shorter than inProgressTimeout");
      }
      return new IdempotentExecutor<>(this);
    }

    private static Duration positive(String what, Duration d) {
      if (d == null || d.isZero() || d.isNegative()) {
        throw new IllegalArgumentException(what + " must be positive, got " + d);
      }
      return d;
    }
  }
}
