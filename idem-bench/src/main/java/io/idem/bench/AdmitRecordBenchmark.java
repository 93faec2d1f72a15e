package io.idem.bench;

import io.idem.core.Admission;
import io.idem.core.Registration;
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
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One thread admitting and recording new commands: the per-command work of the state machine's
 * apply loop, minus the KV operation itself. Sessions are served round robin; each command
 * acknowledges everything but the last {@code pipeline - 1} responses, as a pipelining client does.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class AdmitRecordBenchmark {

  @Param({"1000", "100000"})
  int sessions;

  @Param({"1", "16"})
  int pipeline;

  private SessionTable table;
  private long[] ids;
  private long[] nextSeq;
  private byte[] response;
  private int cursor;
  private long now;

  @Setup(Level.Trial)
  public void setUp() {
    table =
        new SessionTable(SessionTableConfig.builder().maxSessions(sessions).window(128).build());
    ids = new long[sessions];
    nextSeq = new long[sessions];
    for (int i = 0; i < sessions; i++) {
      ids[i] = 1 + 2L * i;
      Registration r = table.register(ids[i], i, -i, null, 60_000, i, 0);
      if (!(r instanceof Registration.Granted)) {
        throw new IllegalStateException("setup: " + r);
      }
      nextSeq[i] = 1;
    }
    response = new byte[16];
  }

  @Benchmark
  public long admitAndRecord() {
    int i = cursor;
    cursor = i + 1 == sessions ? 0 : i + 1;
    long id = ids[i];
    long seq = nextSeq[i]++;
    long ack = Math.max(1, seq - pipeline + 1);
    // Log time advances one millisecond per full round, as batches of a busy leader would.
    if (i == 0) {
      now++;
    }
    if (table.admit(id, 0, seq, ack, now) != Admission.NEW) {
      throw new IllegalStateException("not new: session " + id + " seq " + seq);
    }
    table.record(id, seq, ack, now, response);
    return seq;
  }
}
