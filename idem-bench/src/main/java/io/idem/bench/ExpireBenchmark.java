package io.idem.bench;

import io.idem.core.SessionTable;
import io.idem.core.SessionTableConfig;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Expiring 1,000,000 sessions. Half were active after registering, so the expiry heap must first
 * re-key them (its keys lag behind activity by design) before they expire too: the worst case of
 * the lazy scheme. Reported per whole expiry of all sessions.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3)
@Measurement(iterations = 10)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xmx4g"})
public class ExpireBenchmark {
  static final int SESSIONS = 1_000_000;

  private SessionTable table;

  @Setup(Level.Invocation)
  public void fill() {
    table = new SessionTable(SessionTableConfig.builder().maxSessions(SESSIONS).build());
    for (int i = 0; i < SESSIONS; i++) {
      // Registration times spread over 10 s of log time, TTLs of 30 to 60 s.
      table.register(i + 1, i, i, null, 30_000 + (i % 30_001), i, i / 100);
    }
    for (int i = 0; i < SESSIONS; i += 2) {
      table.keepAlive(i + 1, 0, 1, 20_000);
    }
  }

  @Benchmark
  public int expireAll() {
    int n = table.expire(1_000_000);
    if (n != SESSIONS) {
      throw new IllegalStateException("expired " + n);
    }
    return n;
  }
}
