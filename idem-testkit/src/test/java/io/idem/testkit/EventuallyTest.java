package io.idem.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Bounded polling: the first non-null answer, or a failure (get) or nothing (within) in time. */
@Timeout(30)
class EventuallyTest {

  @Test
  void getReturnsTheFirstNonNullAnswerAndFailsAfterTheTimeout() {
    AtomicInteger polls = new AtomicInteger();
    assertThat(
            Eventually.get(
                "the third poll",
                Duration.ofSeconds(5),
                () -> polls.incrementAndGet() >= 3 ? "x" : null))
        .isEqualTo("x");
    assertThat(polls).hasValue(3);
    assertThatThrownBy(
            () ->
                Eventually.get(
                    "nothing",
                    Duration.ofMillis(100),
                    () -> {
                      throw new IllegalStateException("not yet");
                    },
                    () -> "still nothing"))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("waiting for nothing; still nothing")
        .hasCauseInstanceOf(IllegalStateException.class);
  }

  @Test
  void withinIsEmptyAfterTheTimeoutInsteadOfFailing() throws InterruptedException {
    AtomicInteger polls = new AtomicInteger();
    assertThat(
            Eventually.within(Duration.ofSeconds(5), () -> polls.incrementAndGet() >= 3 ? 7 : null))
        .contains(7);
    long start = System.nanoTime();
    assertThat(Eventually.within(Duration.ofMillis(200), () -> null)).isEmpty();
    assertThat(Duration.ofNanos(System.nanoTime() - start))
        .isGreaterThanOrEqualTo(Duration.ofMillis(200));
    // Polled every 100 ms: three polls take at least 200 ms.
    polls.set(0);
    start = System.nanoTime();
    assertThat(
            Eventually.within(
                Duration.ofSeconds(5),
                Duration.ofMillis(100),
                () -> polls.incrementAndGet() >= 3 ? 7 : null))
        .contains(7);
    assertThat(Duration.ofNanos(System.nanoTime() - start))
        .isGreaterThanOrEqualTo(Duration.ofMillis(200));
    // A probe that throws counts as not yet.
    AtomicInteger calls = new AtomicInteger();
    assertThat(
            Eventually.within(
                Duration.ofSeconds(5),
                () -> {
                  if (calls.incrementAndGet() < 2) {
                    throw new IllegalStateException("not yet");
                  }
                  return "y";
                }))
        .contains("y");
  }

  @Test
  void withinStopsWhenInterrupted() {
    Thread.currentThread().interrupt();
    assertThatThrownBy(() -> Eventually.within(Duration.ofSeconds(5), () -> null))
        .isInstanceOf(InterruptedException.class);
    assertThat(Thread.interrupted()).isFalse();
  }
}
