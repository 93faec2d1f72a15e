package io.idem.lab;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Recorder;

/** The closed loops of one run: each issues an operation and, on completion, the next. */
record BenchLanes(
    BenchTarget target,
    long end,
    long warmupEnd,
    Recorder recorder,
    AtomicLong done,
    AtomicLong errors,
    AtomicReference<Throwable> firstError,
    AtomicLong inFlight) {

  void issue(int session, AtomicLong counter) {
    long t0 = System.nanoTime();
    if (t0 >= end) {
      return;
    }
    inFlight.incrementAndGet();
    target
        .op(session, counter.getAndIncrement())
        .whenComplete(
            (r, e) -> {
              long t1 = System.nanoTime();
              if (e != null) {
                errors.incrementAndGet();
                firstError.compareAndSet(null, e);
              } else if (t0 >= warmupEnd && t1 < end) {
                recorder.recordValue(Math.max(1, (t1 - t0) / 1_000));
                done.incrementAndGet();
              }
              inFlight.decrementAndGet();
              if (e == null) { // a failed lane stops: the run reports errors and exits non-zero
                issue(session, counter);
              }
            });
  }
}
