package io.idem.testkit;

import java.time.Duration;
import java.util.Optional;
import java.util.function.Supplier;

/** Bounded polling for tests: waits for a condition with a time limit, never forever. */
public final class Eventually {
  private static final Duration POLL = Duration.ofMillis(20);

  private Eventually() {}

  /** Polls {@code probe} every 20 ms until it returns non-null; fails after {@code timeout}. */
  public static <T> T get(String what, Duration timeout, Supplier<T> probe) {
    return get(what, timeout, probe, () -> "");
  }

  /** As {@link #get(String, Duration, Supplier)}, with a description of the last state. */
  public static <T> T get(
      String what, Duration timeout, Supplier<T> probe, Supplier<String> state) {
    RuntimeException[] last = new RuntimeException[1];
    T v;
    try {
      v = poll(timeout, POLL, probe, last);
    } catch (InterruptedException ie) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted waiting for " + what, ie);
    }
    if (v == null) {
      AssertionError e =
          new AssertionError(
              "timed out after " + timeout + " waiting for " + what + "; " + state.get());
      if (last[0] != null) {
        e.initCause(last[0]);
      }
      throw e;
    }
    return v;
  }

  /** Waits until {@code condition} holds. */
  public static void until(String what, Duration timeout, Supplier<Boolean> condition) {
    until(what, timeout, condition, () -> "");
  }

  /** As {@link #until(String, Duration, Supplier)}, with a description of the last state. */
  public static void until(
      String what, Duration timeout, Supplier<Boolean> condition, Supplier<String> state) {
    get(what, timeout, () -> condition.get() ? Boolean.TRUE : null, state);
  }

  /**
   * Polls {@code probe} every 20 ms until it returns non-null, as {@link #get(String, Duration,
   * Supplier)}, but where running out of time is an answer rather than a failure: empty after
   * {@code timeout}. A probe that throws counts as not yet.
   *
   * @throws InterruptedException if the waiting thread is interrupted
   */
  public static <T> Optional<T> within(Duration timeout, Supplier<T> probe)
      throws InterruptedException {
    return within(timeout, POLL, probe);
  }

  /**
   * As {@link #within(Duration, Supplier)}, polling every {@code every} instead of 20 ms (a probe
   * that costs the system under test something, or that paces itself: zero).
   */
  public static <T> Optional<T> within(Duration timeout, Duration every, Supplier<T> probe)
      throws InterruptedException {
    return Optional.ofNullable(poll(timeout, every, probe, new RuntimeException[1]));
  }

  /**
   * The probe's first non-null answer, or null once {@code timeout} passed; the last exception the
   * probe threw goes to {@code last[0]}.
   */
  private static <T> T poll(
      Duration timeout, Duration every, Supplier<T> probe, RuntimeException[] last)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      try {
        T v = probe.get();
        if (v != null) {
          return v;
        }
      } catch (RuntimeException e) {
        last[0] = e;
      }
      if (System.nanoTime() > deadline) {
        return null;
      }
      Thread.sleep(every.toMillis());
    }
  }
}
