package io.idem.lab;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The open loop of {@code idem bench --rate}: operations go out at the rate whatever the target
 * does, and a stall shows in the latency of every operation due during it (no coordinated
 * omission); a run that completes less than its rate is flagged; and {@code idem bench-plot} turns
 * the runs' JSON lines into the table and the PNG.
 */
@Timeout(60)
class BenchOpenLoopTest {
  @TempDir Path dir;

  /**
   * Answers at once, except that everything sent in [stallFrom, stallTo) is answered at stallTo.
   */
  private static final class StallingTarget implements BenchTarget {
    final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor();
    volatile long stallFrom = Long.MAX_VALUE;
    volatile long stallTo = Long.MAX_VALUE;
    final boolean neverAnswerInStall;

    StallingTarget(boolean neverAnswerInStall) {
      this.neverAnswerInStall = neverAnswerInStall;
    }

    @Override
    public String name() {
      return "stalling";
    }

    @Override
    public CompletableFuture<?> op(int session, long n) {
      long now = System.nanoTime();
      if (now >= stallFrom && now < stallTo) {
        CompletableFuture<Object> f = new CompletableFuture<>();
        if (!neverAnswerInStall) {
          timer.schedule(() -> f.complete(n), stallTo - now, TimeUnit.NANOSECONDS);
        }
        return f;
      }
      return CompletableFuture.completedFuture(n);
    }

    @Override
    public void close() {
      timer.shutdownNow();
    }
  }

  private static BenchSettings open(double rate, Duration duration, int maxInFlight) {
    return new BenchSettings(
        4,
        1,
        BenchCommand.Workload.put,
        false,
        100,
        Duration.ofMinutes(1),
        Duration.ofMillis(200),
        duration,
        null,
        rate,
        maxInFlight,
        List.of(ProcessHandle.current().pid()));
  }

  @Test
  void aStallShowsInTheLatencyOfEveryOperationDueDuringIt() throws Exception {
    StringWriter out = new StringWriter();
    try (StallingTarget target = new StallingTarget(false)) {
      // 1,000/s for 2 s; the target stalls for 500 ms from 0.7 s into the measured window.
      long start = System.nanoTime();
      target.stallFrom = start + TimeUnit.MILLISECONDS.toNanos(900);
      target.stallTo = target.stallFrom + TimeUnit.MILLISECONDS.toNanos(500);
      BenchRun.Result r =
          new BenchRun(
                  open(1_000, Duration.ofSeconds(2), 10),
                  new PrintWriter(out, true),
                  new PrintWriter(new StringWriter(), true))
              .measure(target);
      // About a quarter of the operations were due during the stall, and waited up to 500 ms
      // from when they were due: p99 sees the stall. Only 10 may be outstanding, so the rest
      // were sent after it and answered at once: timed from their sends (as a closed loop
      // times them), 10 slow ones of 2,000 would leave p99 low.
      assertThat(r.p99()).as(out.toString()).isGreaterThan(400);
      assertThat(r.p50()).as(out.toString()).isLessThan(50);
      assertThat(r.opsPerSecond()).as(out.toString()).isBetween(970.0, 1_001.0);
    }
    String[] lines = out.toString().strip().split("[\\r\\n]+");
    String json = lines[lines.length - 1];
    assertThat(json)
        .contains("\"rate\":1000.0", "\"short\":false", "\"max_ms\":")
        .containsPattern("\"server_cpu_us_per_op\":[0-9.]+")
        .containsPattern("\"errors\":0[,}]");
    assertThat(out.toString())
        .contains("open loop at 1,000/s over 4 sessions")
        .doesNotContain("SHORT");
  }

  @Test
  void aRunThatCompletesLessThanItsRateIsFlaggedShort() throws Exception {
    StringWriter out = new StringWriter();
    try (StallingTarget target = new StallingTarget(true)) {
      // Nothing sent after 0.5 s into the window is ever answered, and at most 50 may be
      // outstanding: the sender waits at the bound, and the run completes a quarter of its rate.
      long start = System.nanoTime();
      target.stallFrom = start + TimeUnit.MILLISECONDS.toNanos(700);
      BenchRun.Result r =
          new BenchRun(
                  open(1_000, Duration.ofSeconds(2), 50),
                  new PrintWriter(out, true),
                  new PrintWriter(new StringWriter(), true))
              .measure(target);
      assertThat(r.opsPerSecond()).isLessThan(0.97 * 1_000);
    }
    assertThat(out.toString()).contains("SHORT of the rate").contains("\"short\":true");
  }

  @Test
  void benchPlotPrintsOneTableAndDrawsTheOpenLoopRuns() throws Exception {
    Path runs = dir.resolve("runs.jsonl");
    Files.write(
        runs,
        List.of(
            "etcd put, 256 sessions x window 1: 9000 writes/s",
            "{\"target\":\"etcd\",\"workload\":\"put\",\"sessions\":256,\"window\":1,\"ops_per_s\":9000.0,"
                + "\"p50_ms\":20.0,\"p99_ms\":60.0,\"p999_ms\":80.0,\"max_ms\":90.0,\"errors\":0}",
            "{\"target\":\"etcd\",\"workload\":\"put\",\"ops_per_s\":2250.0,\"p50_ms\":2.0,"
                + "\"p99_ms\":6.0,\"p999_ms\":8.0,\"max_ms\":9.0,\"errors\":0,\"rate\":2250.0,"
                + "\"short\":false,\"max_send_lag_ms\":0.1,\"server_cpu_us_per_op\":120.5}",
            "{\"target\":\"idem\",\"workload\":\"put\",\"ops_per_s\":2000.0,\"p50_ms\":1.0,"
                + "\"p99_ms\":3.0,\"p999_ms\":4.0,\"max_ms\":5.0,\"errors\":0,\"rate\":2250.0,"
                + "\"short\":true,\"max_send_lag_ms\":0.1}"));
    Path png = dir.resolve("plot/p99.png");
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int exit =
        IdemLab.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute("bench-plot", "--png", png.toString(), runs.toString());
    assertThat(exit).as(err.toString()).isZero();
    assertThat(out.toString())
        .contains("| etcd | put | closed | (peak) | 9,000 |")
        .contains("| etcd | put | open | 2,250 | 2,250 | 2.00 | 6.00 | 8.00 | 9.00 | 120.5 |")
        .contains("| idem | put | open | 2,250 | 2,000 SHORT |")
        .contains("(2 open-loop runs)");
    byte[] bytes = Files.readAllBytes(png);
    assertThat(bytes.length).isGreaterThan(1_000);
    assertThat(new String(bytes, 1, 3, java.nio.charset.StandardCharsets.US_ASCII))
        .isEqualTo("PNG");
  }
}
