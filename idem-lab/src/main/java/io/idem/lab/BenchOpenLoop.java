package io.idem.lab;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.HdrHistogram.Recorder;

/**
 * The open loop of one run ({@code idem bench --rate R}): operation k is due at {@code start +
 * k/R}, whatever the earlier ones are doing, and its latency runs from when it was due, not from
 * when it was sent. So a stall of the system shows in the latency of every operation due during it,
 * instead of pausing the senders (no coordinated omission). The sessions take the operations in
 * turn.
 *
 * <p>At most {@code maxInFlight} operations are outstanding: past that the sender waits, and the
 * wait counts in the latency of the operations it delays ({@link #maxSendLagNanos} says how late
 * the latest send was).
 */
final class BenchOpenLoop implements Runnable {
  /**
   * The sender's shortest sleep: it wakes at most 4,000 times a second and then sends every
   * operation due by then. An operation sent up to this much after its due time has the delay in
   * its latency. Waking for each operation cost the bench about three times the CPU per operation
   * of the closed loop, on the cores the servers under test share.
   */
  static final long MIN_PARK_NANOS = 250_000;

  private final BenchTarget target;
  private final double rate;
  private final int sessions;
  private final long start;
  private final long warmupEnd;
  private final long end;
  private final int maxInFlight;
  private final long giveUpAfterEndNanos;
  private final Recorder recorder;
  private final AtomicLong done;
  private final AtomicLong errors;
  private final AtomicReference<Throwable> firstError;
  private final AtomicLong inFlight;
  private final long[] counters;
  private final AtomicLong due = new AtomicLong();
  private volatile long maxSendLagNanos;

  BenchOpenLoop(
      BenchTarget target,
      double rate,
      int sessions,
      long start,
      long warmupEnd,
      long end,
      int maxInFlight,
      long giveUpAfterEndNanos,
      Recorder recorder,
      AtomicLong done,
      AtomicLong errors,
      AtomicReference<Throwable> firstError,
      AtomicLong inFlight) {
    this.target = target;
    this.rate = rate;
    this.sessions = sessions;
    this.start = start;
    this.warmupEnd = warmupEnd;
    this.end = end;
    this.maxInFlight = maxInFlight;
    this.giveUpAfterEndNanos = giveUpAfterEndNanos;
    this.recorder = recorder;
    this.done = done;
    this.errors = errors;
    this.firstError = firstError;
    this.inFlight = inFlight;
    this.counters = new long[sessions];
  }

  /** Sends every operation due before the end, each when it is due (or as soon after as it can). */
  @Override
  public void run() {
    double interval = 1e9 / rate;
    for (long k = 0; ; ) {
      long intended = start + (long) (k * interval);
      if (intended >= end) {
        return;
      }
      long now = System.nanoTime();
      if (now - end > giveUpAfterEndNanos) {
        return; // the rest was never sent: the run falls short of its rate
      }
      if (intended > now) {
        LockSupport.parkNanos(Math.max(intended - now, MIN_PARK_NANOS));
        continue;
      }
      if (inFlight.get() >= maxInFlight) {
        LockSupport.parkNanos(50_000);
        continue;
      }
      if (intended >= warmupEnd && now - intended > maxSendLagNanos) {
        maxSendLagNanos = now - intended;
      }
      issue(k, intended);
      k++;
    }
  }

  private void issue(long k, long intended) {
    int session = (int) (k % sessions);
    long n = counters[session]++;
    boolean measured = intended >= warmupEnd;
    if (measured) {
      due.incrementAndGet();
    }
    inFlight.incrementAndGet();
    CompletableFuture<?> f;
    try {
      f = target.op(session, n);
    } catch (RuntimeException e) {
      f = CompletableFuture.failedFuture(e);
    }
    f.whenComplete(
        (r, e) -> {
          long t1 = System.nanoTime();
          if (e != null) {
            errors.incrementAndGet();
            firstError.compareAndSet(null, e);
          } else if (measured) {
            recorder.recordValue(Math.max(1, (t1 - intended) / 1_000));
            done.incrementAndGet();
          }
          inFlight.decrementAndGet();
        });
  }

  /** The operations due in the measured window, sent or still waiting to be. */
  long due() {
    return due.get();
  }

  /** How late, at most, an operation due in the measured window was sent. */
  long maxSendLagNanos() {
    return maxSendLagNanos;
  }
}
