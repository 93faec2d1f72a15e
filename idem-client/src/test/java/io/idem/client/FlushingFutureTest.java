package io.idem.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A wait on a call's future, or on one derived from it, first sends what the session holds back:
 * here the "flush" is what completes the call, so a wait that did not flush would never end.
 */
@Timeout(30)
class FlushingFutureTest {
  private final AtomicInteger flushes = new AtomicInteger();
  private final FlushingFuture<Integer> call = new FlushingFuture<>(this::flush);

  private void flush() {
    flushes.incrementAndGet();
    call.complete(41);
  }

  @Test
  void getFlushesFirst() throws Exception {
    assertThat(call.get()).isEqualTo(41);
    assertThat(flushes).hasValue(1);
  }

  @Test
  void getWithATimeoutAndJoinFlushFirst() throws Exception {
    FlushingFuture<Integer> other = new FlushingFuture<>(() -> flushes.incrementAndGet());
    other.complete(1);
    assertThat(other.get(1, TimeUnit.SECONDS)).isEqualTo(1);
    assertThat(flushes).as("a future already done does not flush").hasValue(0);
    assertThat(call.join()).isEqualTo(41);
    assertThat(flushes).hasValue(1);
  }

  @Test
  void aDerivedFutureFlushesToo() throws Exception {
    CompletableFuture<Integer> next = call.thenApply(v -> v + 1);
    CompletableFuture<Integer> composed =
        next.thenCompose(v -> CompletableFuture.completedFuture(v + 1));
    assertThat(next).isInstanceOf(FlushingFuture.class);
    assertThat(composed).isInstanceOf(FlushingFuture.class);
    assertThat(composed.get(1, TimeUnit.SECONDS)).isEqualTo(43);
    assertThat(flushes).hasValue(1);
  }
}
