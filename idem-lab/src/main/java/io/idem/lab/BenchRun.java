package io.idem.lab;

import io.idem.cli.Errors;
import java.io.PrintWriter;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;

/**
 * The measurement of one bench run against one {@link BenchTarget}: the closed loops, the progress
 * bar, the per-second timeline, and the report (two lines, then one line of JSON). Not thread-safe:
 * one {@link #measure} at a time.
 */
final class BenchRun {
  private final BenchSettings settings;
  private final PrintWriter out;
  private final PrintWriter err;

  /**
   * What a run measured: its exit code (0, or 1 when operations failed), the operations that
   * failed, those still in flight when it gave up waiting for them, and the throughput and latency
   * percentiles (ms) it reported.
   */
  record Result(
      int code,
      long errors,
      long inFlight,
      double opsPerSecond,
      double p50,
      double p99,
      double p999) {}

  BenchRun(BenchSettings settings, PrintWriter out, PrintWriter err) {
    this.settings = settings;
    this.out = out;
    this.err = err;
  }

  /** How long a run waits after its end for what is in flight (and an open loop's late sends). */
  private static final long DRAIN_NANOS = TimeUnit.SECONDS.toNanos(30);

  /**
   * Runs {@code window} closed loops per session: each issues an operation and, when it completes,
   * the next, until the time is up; or, with a rate, the open loop ({@link BenchOpenLoop}).
   * Operations started (closed) or due (open) during the warm-up are not counted.
   */
  Result measure(BenchTarget target) throws InterruptedException {
    int sessions = settings.sessions();
    int window = settings.window();
    Recorder recorder = new Recorder(3);
    AtomicLong done = new AtomicLong();
    AtomicLong errors = new AtomicLong();
    AtomicReference<Throwable> firstError = new AtomicReference<>();
    AtomicLong inFlight = new AtomicLong();
    long start = System.nanoTime();
    long warmupEnd = start + settings.warmup().toNanos();
    long end = warmupEnd + settings.duration().toNanos();
    BenchOpenLoop open = null;
    Thread sender = null;
    CpuMeter cpu = new CpuMeter(settings.cpuPids());
    if (settings.open()) {
      open =
          new BenchOpenLoop(
              target,
              settings.rate(),
              sessions,
              start,
              warmupEnd,
              end,
              settings.maxInFlight(),
              DRAIN_NANOS,
              recorder,
              done,
              errors,
              firstError,
              inFlight);
      sender = new Thread(open, "bench-open-loop");
      sender.setDaemon(true);
      sender.start();
    } else {
      BenchLanes lanes =
          new BenchLanes(target, end, warmupEnd, recorder, done, errors, firstError, inFlight);
      for (int i = 0; i < sessions; i++) {
        AtomicLong counter = new AtomicLong();
        for (int lane = 0; lane < window; lane++) {
          lanes.issue(i, counter);
        }
      }
    }
    boolean cpuStarted = false;
    long nextTick = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    long lastDone = 0;
    Histogram h = new Histogram(3);
    Histogram second = null;
    try (BenchTimeline line =
        BenchTimeline.open(settings.timeline(), target.name() + " " + settings.workloadName())) {
      while (System.nanoTime() < end) {
        TimeUnit.NANOSECONDS.sleep(Math.max(0, Math.min(end, nextTick) - System.nanoTime()));
        long now = System.nanoTime();
        if (!cpuStarted && now >= warmupEnd) {
          cpu.start();
          cpuStarted = true;
        }
        if (now >= nextTick) {
          long d = done.get();
          progress(now, warmupEnd, d - lastDone);
          lastDone = d;
          nextTick += TimeUnit.SECONDS.toNanos(1);
          second = recorder.getIntervalHistogram(second);
          h.add(second);
          if (now > warmupEnd) {
            line.write(second);
          }
        }
      }
      cpu.stop();
      long drainDeadline = System.nanoTime() + DRAIN_NANOS;
      if (sender != null) {
        sender.join(TimeUnit.NANOSECONDS.toMillis(DRAIN_NANOS) + 1_000);
      }
      while (inFlight.get() > 0 && System.nanoTime() < drainDeadline) {
        Thread.sleep(10); // let what is in flight finish before the clients close
      }
      second = recorder.getIntervalHistogram(second);
      h.add(second);
      if (second.getTotalCount() > 0) {
        line.write(second);
      }
    }
    long ops = done.get();
    long retries = target.retries();
    long duplicates = target.duplicates();
    double seconds = settings.duration().toNanos() / 1e9;
    double throughput = ops / seconds;
    out.println();
    String loop =
        open == null
            ? String.format(Locale.ROOT, "%d sessions x window %d", sessions, window)
            : String.format(
                Locale.ROOT, "open loop at %,.0f/s over %d sessions", settings.rate(), sessions);
    out.printf(
        Locale.ROOT,
        "%s %s, %s, %d-byte values, %.1f s after %.1f s warm-up: %.0f %s/s%s%n",
        target.name(),
        settings.workloadName(),
        loop,
        settings.valueSize(),
        seconds,
        settings.warmup().toNanos() / 1e9,
        throughput,
        settings.unit(),
        open == null ? "" : " achieved");
    boolean isShort = false;
    double lagMs = 0;
    if (open != null) {
      lagMs = open.maxSendLagNanos() / 1e6;
      isShort = throughput < SHORT_OF_RATE * settings.rate();
      if (isShort) {
        out.printf(
            Locale.ROOT,
            "SHORT of the rate: %.0f of %.0f %s/s completed (%d of %d due were sent; the latest"
                + " send was %.1f ms late; %d still in flight at the end)%n",
            throughput,
            settings.rate(),
            settings.unit(),
            open.due(),
            Math.round(settings.rate() * seconds),
            lagMs,
            inFlight.get());
      }
    }
    String cpuLine = cpu.perOp(ops);
    if (!cpuLine.isEmpty()) {
      out.println(cpuLine);
    }
    out.printf(
        Locale.ROOT,
        "latency ms: p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f   retries %d  duplicates suppressed %d  errors %d%n",
        ms(h, 50),
        ms(h, 99),
        ms(h, 99.9),
        h.getMaxValue() / 1000.0,
        retries,
        duplicates,
        errors.get());
    out.printf(
        Locale.ROOT,
        "{\"target\":\"%s\",\"workload\":\"%s\",\"sessions\":%d,\"window\":%d,\"value_size\":%d,"
            + "\"seconds\":%.2f,\"ops\":%d,\"ops_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
            + "\"p999_ms\":%.3f,\"max_ms\":%.3f,\"retries\":%d,\"duplicates\":%d,\"errors\":%d"
            + "%s%s}%n",
        target.name(),
        settings.workloadName(),
        sessions,
        window,
        settings.valueSize(),
        seconds,
        ops,
        throughput,
        ms(h, 50),
        ms(h, 99),
        ms(h, 99.9),
        h.getTotalCount() == 0 ? 0 : h.getMaxValue() / 1000.0,
        retries,
        duplicates,
        errors.get(),
        open == null
            ? ""
            : String.format(
                Locale.ROOT,
                ",\"rate\":%.1f,\"short\":%b,\"max_send_lag_ms\":%.3f",
                settings.rate(),
                isShort,
                lagMs),
        cpu.json(ops));
    if (firstError.get() != null) {
      err.println("idem: first error: " + Errors.oneLine(firstError.get()));
    }
    long failed = errors.get();
    return new Result(
        failed == 0 ? 0 : 1, failed, inFlight.get(), throughput, ms(h, 50), ms(h, 99), ms(h, 99.9));
  }

  /** An open loop that completed less than this share of its rate is reported short. */
  static final double SHORT_OF_RATE = 0.97;

  /** {@code percentile} of {@code h} (microseconds) in milliseconds; 0 for an empty one. */
  static double ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(percentile) / 1000.0;
  }

  private void progress(long now, long warmupEnd, long lastSecond) {
    int width = 30;
    double fraction =
        Math.max(0, Math.min(1, (now - warmupEnd) / (double) settings.duration().toNanos()));
    int filled = (int) (fraction * width);
    out.printf(
        Locale.ROOT,
        "\r[%s%s] %3.0f%%  %,d %s/s %s",
        "#".repeat(filled),
        " ".repeat(width - filled),
        fraction * 100,
        lastSecond,
        settings.unit(),
        now < warmupEnd ? "(warm-up) " : "          ");
    out.flush();
  }
}
