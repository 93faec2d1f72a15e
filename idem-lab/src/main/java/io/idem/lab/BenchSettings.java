package io.idem.lab;

import java.nio.file.Path;
import java.time.Duration;

/**
 * What one bench run measures and how, fixed from the command's options before the run starts: the
 * closed loops ({@code sessions} x {@code window}), the workload and its values, and the measured
 * window. {@code timeline} is null without {@code --timeline}. A {@code rate} above 0 makes it an
 * open loop instead ({@link BenchOpenLoop}): that many operations a second, spread over the
 * sessions, at most {@code maxInFlight} outstanding. {@code cpuPids} are the server processes whose
 * CPU is reported per operation ({@link CpuMeter}).
 */
record BenchSettings(
    int sessions,
    int window,
    BenchCommand.Workload workload,
    boolean ledger,
    int valueSize,
    Duration keyRetention,
    Duration warmup,
    Duration duration,
    Path timeline,
    double rate,
    int maxInFlight,
    java.util.List<Long> cpuPids) {

  /** The scope of the keys workload's idempotency keys. */
  static final String KEY_SCOPE = "bench";

  /** How long the keys workload's owner holds a key: far longer than an acquire and a complete. */
  static final Duration KEY_IN_PROGRESS = Duration.ofSeconds(30);

  /** Whether the run is an open loop at {@link #rate}. */
  boolean open() {
    return rate > 0;
  }

  /** The lanes of the run: one closed loop each, {@code sessions} x {@code window}. */
  int lanes() {
    return sessions * window;
  }

  /** The workload's name in the report: {@code keys+ledger} with {@code --ledger}. */
  String workloadName() {
    return workload + (ledger ? "+ledger" : "");
  }

  /** What one operation of the workload is, for the report. */
  String unit() {
    return switch (workload) {
      case keys -> "keyed operations";
      case get -> "reads";
      default -> "writes";
    };
  }
}
