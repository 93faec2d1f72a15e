package io.idem.lab;

import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.LongFunction;

/** What {@code idem bench} drives: a system that takes one write per call. */
interface BenchTarget extends AutoCloseable {
  /** The name in the report and its JSON line. */
  String name();

  /** How many keys the get workload reads, each written once by {@link #prepare}. */
  int READ_KEYS = 100;

  /** The key that read {@code n} of the get workload reads, below the target's own prefix. */
  static String readKey(long n) {
    return "read/" + Math.floorMod(n, READ_KEYS);
  }

  /**
   * Readies the target before the run: with the get workload, writes the {@link #READ_KEYS} keys
   * that it reads, so that every read finds a value. Nothing for the other workloads, and nothing
   * on the key stores, which run the keys workload only.
   */
  default void prepare() throws Exception {}

  /** Issues operation {@code n} of {@code session}; completes when it is acknowledged. */
  CompletableFuture<?> op(int session, long n);

  /** Requests resent so far: none, unless the target retries. */
  default long retries() {
    return 0;
  }

  /** Answers that were saved answers of earlier copies: none, unless the target has them. */
  default long duplicates() {
    return 0;
  }

  /**
   * One keyed operation of the key stores: {@code acquire} of a key no one used before must answer
   * {@link Acquisition.Acquired}, and {@code complete} with its token must answer {@link
   * Settlement.Done}; any other answer fails the operation with what it was.
   */
  static CompletableFuture<Settlement> acquireThenComplete(
      CompletionStage<Acquisition> acquire, LongFunction<CompletionStage<Settlement>> complete) {
    return acquire
        .thenCompose(
            a ->
                a instanceof Acquisition.Acquired got
                    ? complete.apply(got.token())
                    : CompletableFuture.failedFuture(
                        new IllegalStateException("acquire of a new key answered " + a)))
        .thenApply(
            s -> {
              if (!(s instanceof Settlement.Done)) {
                throw new IllegalStateException("complete of an acquired key answered " + s);
              }
              return s;
            })
        .toCompletableFuture();
  }

  @Override
  void close();
}
