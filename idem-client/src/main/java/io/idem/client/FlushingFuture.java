package io.idem.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A call's future, and every future derived from it ({@code thenApply}, {@code thenCompose}, ...):
 * a thread that waits on one first sends what its session holds back. A callback of a round of
 * completions may make a call and then wait for its answer; without this, the call's request would
 * wait for the end of the round, which waits for the callback (see {@link SessionDriver}).
 */
final class FlushingFuture<T> extends CompletableFuture<T> {
  private final Runnable flush;

  FlushingFuture(Runnable flush) {
    this.flush = flush;
  }

  @Override
  public <U> CompletableFuture<U> newIncompleteFuture() {
    return new FlushingFuture<>(flush);
  }

  @Override
  public T get() throws InterruptedException, ExecutionException {
    beforeWait();
    return super.get();
  }

  @Override
  public T get(long timeout, TimeUnit unit)
      throws InterruptedException, ExecutionException, TimeoutException {
    beforeWait();
    return super.get(timeout, unit);
  }

  @Override
  public T join() {
    beforeWait();
    return super.join();
  }

  private void beforeWait() {
    if (!isDone()) {
      flush.run();
    }
  }
}
