package io.idem.lab;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/**
 * The CPU that the server processes ({@code --cpu-pids}) and the bench itself spent during the
 * measured window, for CPU-µs per operation beside each throughput figure. A server's time is its
 * user plus system time from {@code /proc/PID/stat}, summed over its threads, in Linux's user-space
 * ticks (USER_HZ, 100 per second on Linux: 10 ms each, so a 30 s window is measured to well under
 * 1%); the bench's is the JVM's process CPU time.
 */
final class CpuMeter {
  /** Linux's user-space clock tick: {@code /proc} counts CPU time in 1/100 s on every platform. */
  static final long USER_HZ = 100;

  private final List<Long> pids;
  private long[] serverTicksAtStart;
  private long benchNanosAtStart;
  private long serverTicks = -1; // over the window; -1 until stopped, or when a server was gone
  private long benchNanos = -1;

  CpuMeter(List<Long> pids) {
    this.pids = List.copyOf(pids);
    this.serverTicksAtStart = new long[pids.size()];
  }

  /** Marks the start of the measured window. */
  void start() {
    for (int i = 0; i < pids.size(); i++) {
      serverTicksAtStart[i] = ticks(pids.get(i));
    }
    benchNanosAtStart = benchCpuNanos();
  }

  /**
   * Marks its end; a server whose {@code /proc} entry could not be read leaves no server figure.
   */
  void stop() {
    long bench = benchCpuNanos();
    benchNanos = bench < 0 || benchNanosAtStart < 0 ? -1 : bench - benchNanosAtStart;
    if (pids.isEmpty()) {
      return;
    }
    long sum = 0;
    for (int i = 0; i < pids.size(); i++) {
      long now = ticks(pids.get(i));
      if (now < 0 || serverTicksAtStart[i] < 0) {
        serverTicks = -1;
        return;
      }
      sum += now - serverTicksAtStart[i];
    }
    serverTicks = sum;
  }

  /** The line of the report: the servers' and the bench's CPU-µs per operation; empty if none. */
  String perOp(long ops) {
    if (ops <= 0 || (serverTicks < 0 && benchNanos < 0)) {
      return "";
    }
    StringBuilder b = new StringBuilder("cpu per operation:");
    if (serverTicks >= 0) {
      b.append(
          String.format(
              Locale.ROOT,
              " servers %.1f µs (%d processes, %.2f s)",
              serverMicros() / ops,
              pids.size(),
              serverMicros() / 1e6));
    }
    if (benchNanos >= 0) {
      b.append(
          String.format(
              Locale.ROOT, " bench %.1f µs (%.2f s)", benchNanos / 1e3 / ops, benchNanos / 1e9));
    }
    return b.toString();
  }

  /** The JSON fields of the same figures, each with its leading comma; empty if none. */
  String json(long ops) {
    if (ops <= 0) {
      return "";
    }
    StringBuilder b = new StringBuilder();
    if (serverTicks >= 0) {
      b.append(String.format(Locale.ROOT, ",\"server_cpu_us_per_op\":%.2f", serverMicros() / ops));
    }
    if (benchNanos >= 0) {
      b.append(String.format(Locale.ROOT, ",\"bench_cpu_us_per_op\":%.2f", benchNanos / 1e3 / ops));
    }
    return b.toString();
  }

  private double serverMicros() {
    return serverTicks * (1e6 / USER_HZ);
  }

  /** Process {@code pid}'s user plus system ticks, or -1 if it cannot be read. */
  static long ticks(long pid) {
    try {
      String stat = Files.readString(Path.of("/proc", Long.toString(pid), "stat"));
      // The command name (field 2) is in parentheses and may hold spaces: count from after it.
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      // Fields 14 (utime) and 15 (stime) of proc(5), here 11 and 12 places after field 3.
      return Long.parseLong(f[11]) + Long.parseLong(f[12]);
    } catch (IOException | RuntimeException e) {
      return -1;
    }
  }

  private static long benchCpuNanos() {
    if (ManagementFactory.getOperatingSystemMXBean()
        instanceof com.sun.management.OperatingSystemMXBean os) {
      return os.getProcessCpuTime();
    }
    return -1;
  }
}
