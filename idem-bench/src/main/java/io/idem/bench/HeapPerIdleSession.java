package io.idem.bench;

import io.idem.core.SessionTable;
import io.idem.core.SessionTableConfig;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;

/**
 * Heap bytes retained per idle session: registers {@code N} sessions (default 1,000,000) and
 * measures the used heap after full GCs, before and after. Two shapes: sessions that only
 * registered, and sessions whose last request's 16-byte response is still saved.
 *
 * <p>Run: {@code java -Xmx4g -cp idem-bench/target/benchmarks.jar io.idem.bench.HeapPerIdleSession}
 * (JMH measures time, not retained memory, so this is a plain program).
 */
public final class HeapPerIdleSession {
  private HeapPerIdleSession() {}

  public static void main(String[] args) {
    int n = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
    report("idle, registered only:", n, false);
    report("idle, one 16-byte response saved:", n, true);
  }

  /** Measures in its own frame, so the table is unreachable once it returns. */
  private static void report(String shape, int n, boolean withResponse) {
    long before = usedAfterGc();
    SessionTable table = new SessionTable(SessionTableConfig.builder().maxSessions(n).build());
    byte[] response = new byte[16];
    for (int i = 0; i < n; i++) {
      long id = i + 1L;
      table.register(id, i, ~i, null, 60_000, i, 0);
      if (withResponse) {
        table.admit(id, 0, 1, 1, 0);
        // A fresh array per session: each saved response is its own object on the heap.
        table.record(id, 1, 1, 0, response.clone());
      }
    }
    long after = usedAfterGc();
    System.out.printf(
        "%-36s %,d sessions: %.1f bytes/session%n",
        shape, table.size(), (after - before) / (double) n);
  }

  private static long usedAfterGc() {
    MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
    long used = Long.MAX_VALUE;
    for (int i = 0; i < 5; i++) {
      System.gc();
      used = Math.min(used, memory.getHeapMemoryUsage().getUsed());
    }
    return used;
  }
}
