package io.idem.keys;

import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

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
 */
public final class IdempotentExecutor implements AutoCloseable {

  /** Default {@link Builder#inProgressTimeout}: 30 s. */
  public static final Duration DEFAULT_IN_PROGRESS_TIMEOUT = Duration.ofSeconds(30);

  /** Default {@link Builder#retention}: 24 h. */
  public static final Duration DEFAULT_RETENTION = Duration.ofHours(24);

  /** Default {@link Builder#storeTimeout}: 10 s. */
  public static final Duration DEFAULT_STORE_TIMEOUT = Duration.ofSeconds(10);

  /** How often a waiting duplicate asks the store again. */
  public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofMillis(50);

  private static final byte SUCCESS = 0;
  private static final byte FAILURE = 1;

  /** The business operation. It gets the fencing token of its ownership of the key. */
  @FunctionalInterface
  public interface Operation<T> {
    /** Runs once per key (unless it fails and its failure is not stored). */
    T run(long fencingToken) throws Exception;
  }

  /**
   * A business operation whose deciding write the store applies together with the completion (see
   * {@link KeyStore#completeWith}): it returns its result and that write as an {@link Outcome}.
   */
  @FunctionalInterface
  public interface EffectfulOperation<T> {
    /** Runs once per key (unless it fails and its failure is not stored). */
    Outcome<T> run(long fencingToken) throws Exception;
  }

  /**
   * What an {@link EffectfulOperation} returns: its result, and the write the store applies in the
   * same atomic step as storing the result (null for none). The effect's type is the store's (on
   * Idem, {@code io.idem.client.Write}).
   *
   * @param value the result, stored and replayed
   * @param effect the business write, or null
   */
  public record Outcome<T>(T value, Object effect) {
    /** A result without an effect. */
    public static <T> Outcome<T> of(T value) {
      return new Outcome<>(value, null);
    }

    /** A result whose {@code effect} lands with its completion, or not at all. */
    public static <T> Outcome<T> withEffect(T value, Object effect) {
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

  private final KeyStore store;
  private final Duration inProgressTimeout;
  private final Duration retention;
  private final Duration waitForResult;
  private final Duration pollInterval;
  private final Duration storeTimeout;
  private final Duration renewEvery;
  private final List<Class<? extends Throwable>> storedFailures;
  private final ScheduledExecutorService renewals;

  private IdempotentExecutor(Builder b) {
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
  public static Builder builder(KeyStore store) {
    return new Builder(store);
  }

  /**
   * Runs {@code operation} once for {@code key}, or replays the outcome stored for it.
   *
   * @return the operation's result, from this run or replayed
   * @throws KeyMismatchException the key was used with another fingerprint; nothing ran
   * @throws KeyInProgressException another owner holds the key and waiting was not chosen or ran
   *     out; nothing ran
   * @throws KeyFencedException the operation ran, but another owner took the key over before its
   *     outcome was stored
   * @throws StoredFailureException a failure stored as the key's outcome, replayed
   * @throws KeyStoreException the store failed; the outcome is unknown, and retrying with the same
   *     key is safe
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
      EffectfulOperation<T> operation)
      throws Exception {
    if (waitForResult == null || waitForResult.isNegative()) {
      throw new IllegalArgumentException(
          "waitForResult must be zero or positive, got " + waitForResult);
    }
    long waitUntil = System.nanoTime() + waitForResult.toNanos();
    while (true) {
      Acquisition a = await(key, store.acquire(key, fingerprint, inProgressTimeout, retention));
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
        throw new KeyInProgressException(
            key,
            "another owner holds the key until "
                + ((Acquisition.InProgress) a).deadlineMs()
                + " (store time)",
            null);
      }
      sleep(Math.min(left, pollInterval.toNanos()));
    }
  }

  private <T> T run(IdempotencyKey key, long token, Codec<T> codec, EffectfulOperation<T> operation)
      throws Exception {
    ScheduledFuture<?> renewing = renewEvery.isZero() ? null : renewPeriodically(key, token);
    Outcome<T> outcome;
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
        settle(key, store.complete(key, token, failure(e)));
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
    byte[] response = success(codec.encode(outcome.value()));
    if (outcome.effect() == null) {
      settle(key, store.complete(key, token, response));
    } else {
      settleWithEffect(key, token, response, outcome.effect());
    }
    return outcome.value();
  }

  private void settleWithEffect(IdempotencyKey key, long token, byte[] response, Object effect)
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
      if (refused instanceof KeyStoreException k) {
        throw k;
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
          "another owner (token "
              + f.current()
              + ") took the key over before this outcome was stored; it was not stored",
          null);
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

  private static byte[] success(byte[] value) {
    byte[] out = new byte[value.length + 1];
    out[0] = SUCCESS;
    System.arraycopy(value, 0, out, 1, value.length);
    return out;
  }

  private static byte[] failure(Exception e) {
    String text = e.getClass().getName() + "\n" + (e.getMessage() == null ? "" : e.getMessage());
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    byte[] out = new byte[b.length + 1];
    out[0] = FAILURE;
    System.arraycopy(b, 0, out, 1, b.length);
    return out;
  }

  private static <T> T replay(IdempotencyKey key, Codec<T> codec, byte[] response) {
    if (response.length == 0) {
      throw new KeyStoreException(key, "the stored response is empty: not written by this", null);
    }
    byte[] body = Arrays.copyOfRange(response, 1, response.length);
    if (response[0] == SUCCESS) {
      return codec.decode(body);
    }
    String text = new String(body, StandardCharsets.UTF_8);
    int nl = text.indexOf('\n');
    throw new StoredFailureException(
        key, nl < 0 ? text : text.substring(0, nl), nl < 0 ? "" : text.substring(nl + 1));
  }

  private <R> R await(IdempotencyKey key, CompletionStage<R> stage) {
    try {
      return stage.toCompletableFuture().get(storeTimeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      if (c instanceof KeyStoreException k) {
        throw k;
      }
      throw new KeyStoreException(key, "the store failed: " + c, c);
    } catch (TimeoutException e) {
      throw new KeyStoreException(key, "the store did not answer within " + storeTimeout, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new KeyStoreException(key, "interrupted while waiting for the store", e);
    }
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
  public static final class Builder {
    private final KeyStore store;
    private Duration inProgressTimeout = DEFAULT_IN_PROGRESS_TIMEOUT;
    private Duration retention = DEFAULT_RETENTION;
    private Duration waitForResult = Duration.ZERO;
    private Duration pollInterval = DEFAULT_POLL_INTERVAL;
    private Duration storeTimeout = DEFAULT_STORE_TIMEOUT;
    private Duration renewEvery;
    private final List<Class<? extends Throwable>> storedFailures = new ArrayList<>();

    private Builder(KeyStore store) {
      if (store == null) {
        throw new IllegalArgumentException("store must not be null");
      }
      this.store = store;
    }

    /** How long an owner holds a key without renewing it. Default 30 s. */
    public Builder inProgressTimeout(Duration d) {
      this.inProgressTimeout = positive("inProgressTimeout", d);
      return this;
    }

    /** How long an outcome is kept (and replayed). Default 24 h. */
    public Builder retention(Duration d) {
      this.retention = positive("retention", d);
      return this;
    }

    /**
     * A concurrent duplicate waits up to {@code d} for the outcome (asking the store every {@link
     * #pollInterval}); zero, the default, fails it at once with {@link KeyInProgressException}.
     */
    public Builder waitForResult(Duration d) {
      if (d == null || d.isNegative()) {
        throw new IllegalArgumentException("waitForResult must be zero or positive, got " + d);
      }
      this.waitForResult = d;
      return this;
    }

    /** How often a waiting duplicate asks again. Default 50 ms. */
    public Builder pollInterval(Duration d) {
      this.pollInterval = positive("pollInterval", d);
      return this;
    }

    /** How long one store call may take before it counts as failed. Default 10 s. */
    public Builder storeTimeout(Duration d) {
      this.storeTimeout = positive("storeTimeout", d);
      return this;
    }

    /**
     * How often a running operation renews its key; zero turns renewal off. Default a third of the
     * in-progress timeout.
     */
    public Builder renewEvery(Duration d) {
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
    public final Builder storeFailures(Class<? extends Throwable>... types) {
      for (Class<? extends Throwable> t : types) {
        storedFailures.add(t);
      }
      return this;
    }

    /** The executor. */
    public IdempotentExecutor build() {
      if (renewEvery != null && renewEvery.compareTo(inProgressTimeout) >= 0) {
        throw new IllegalArgumentException(
            "renewEvery " + renewEvery + " must be shorter than inProgressTimeout");
      }
      return new IdempotentExecutor(this);
    }

    private static Duration positive(String what, Duration d) {
      if (d == null || d.isZero() || d.isNegative()) {
        throw new IllegalArgumentException(what + " must be positive, got " + d);
      }
      return d;
    }
  }
}
