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
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Writing, reading and freezing a session table, in two shapes ({@link #shape}: sessions, saved
 * responses each, bytes each): 1,000,000 sessions each holding one saved 16-byte response (the
 * state of a client whose last answer is not yet acknowledged), and 1,000 sessions each holding 256
 * saved responses of 1 KiB (256 MiB, the default backend budget's size). In memory, to measure the
 * codec rather than the disk; the stream is buffered as the server's file stream will be. {@code
 * freeze} is what a replica does under its state lock at each snapshot; {@code write} is what it
 * did before the copy-on-write freeze, and what the writer thread does after.
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
  @Param({"1000000:1:16", "1000:256:1024"})
  public String shape;

  private SessionTable table;
  private byte[] snapshot;
  private ByteArrayOutputStream out;

  @Setup(Level.Trial)
  public void fill() throws IOException {
    String[] p = shape.split(":");
    int sessions = Integer.parseInt(p[0]);
    int saved = Integer.parseInt(p[1]);
    byte[] response = new byte[Integer.parseInt(p[2])];
    table =
        new SessionTable(
            SessionTableConfig.builder().maxSessions(sessions).window(Math.max(saved, 1)).build());
    for (int i = 0; i < sessions; i++) {
      long id = i + 1L;
      long now = i / 100;
      table.register(id, i, ~i, i % 10 == 0 ? "worker-" + i : null, 60_000, i, now);
      for (int seq = 1; seq <= saved; seq++) {
        table.admit(id, 0, seq, 1, now);
        table.record(id, seq, 1, now, response);
      }
    }
    out = new ByteArrayOutputStream(128 << 20);
    table.writeSnapshot(out);
    snapshot = out.toByteArray();
  }

  @Benchmark
  public SessionTable.Frozen freeze() {
    return table.freeze();
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
