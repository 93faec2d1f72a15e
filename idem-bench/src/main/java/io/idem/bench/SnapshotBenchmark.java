package io.idem.bench;

import io.idem.core.SessionTable;
import io.idem.core.SessionTableConfig;
import java.io.BufferedInputStream;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
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
 * Writing and reading a snapshot of 1,000,000 sessions, each holding one saved 16-byte response
 * (the state of a client whose last answer is not yet acknowledged). In memory, to measure the
 * codec rather than the disk; the stream is buffered as the server's file stream will be.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xmx4g"})
public class SnapshotBenchmark {
  static final int SESSIONS = 1_000_000;

  private SessionTable table;
  private byte[] snapshot;
  private ByteArrayOutputStream out;

  @Setup(Level.Trial)
  public void fill() throws IOException {
    table = new SessionTable(SessionTableConfig.builder().maxSessions(SESSIONS).build());
    byte[] response = new byte[16];
    for (int i = 0; i < SESSIONS; i++) {
      long id = i + 1L;
      table.register(id, i, ~i, i % 10 == 0 ? "worker-" + i : null, 60_000, i, i / 100);
      table.admit(id, 0, 1, 1, i / 100);
      table.record(id, 1, 1, i / 100, response);
    }
    out = new ByteArrayOutputStream(128 << 20);
    table.writeSnapshot(out);
    snapshot = out.toByteArray();
  }

  @Benchmark
  public int write() throws IOException {
    out.reset();
    table.writeSnapshot(out);
    return out.size();
  }

  @Benchmark
  public int read() throws IOException {
    SessionTable t =
        SessionTable.readSnapshot(
            new BufferedInputStream(new ByteArrayInputStream(snapshot), 1 << 16));
    return t.size();
  }
}
