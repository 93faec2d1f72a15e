package io.idem.testkit;

import java.time.Duration;
import java.util.function.Supplier;

/** Bounded polling for tests: waits for a condition with a time limit, never forever. */
public final class Eventually {
  private Eventually() {}

  /** Polls {@code probe} every 20 ms until it returns non-null; fails after {@code timeout}. */
  public static <T> T get(String what, Duration timeout, Supplier<T> probe) {
    return get(what, timeout, probe, () -> "");
  }

  /** As {@link #get(String, Duration, Supplier)}, with a description of the last state. */
  public static <T> T get(
      String what, Duration timeout, Supplier<T> probe, Supplier<String> state) {
    long deadline = System.nanoTime() + timeout.toNanos();
    RuntimeException last = null;
    while (true) {
      try {
        T v = probe.get();
        if (v != null) {
          return v;
        }
      } catch (RuntimeException e) {
        last = e;
      }
      if (System.nanoTime() > deadline) {
        AssertionError e =
            new AssertionError(
                "timed out after " + timeout + " waiting for " + what + "; " + state.get());
        if (last != null) {
          e.initCause(last);
        }
        throw e;
      }
      try {
        Thread.sleep(20);
      } catch (InterruptedException ie) {
        Thread.currentThread().interrupt();
        throw new AssertionError("interrupted waiting for " + what, ie);
      }
    }
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
}
