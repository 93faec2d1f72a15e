package io.idem.bench;

import io.idem.core.KeyTable;
import io.idem.core.KeyTable.KeyId;
import java.io.IOException;
import java.io.OutputStream;
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
 * A snapshot of a key table of 820,000 completed keys, shaped as {@code idem bench --workload keys}
 * leaves them (scope {@code bench}, keys like {@code 4f1c2a-7-123456}, no fingerprint, 100-byte
 * responses): the freeze, which the server's apply thread waits for, and what the snapshot writer
 * then does with the frozen copy (its length, its bytes, its digest), to a stream that drops them.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(
    value = 1,
    jvmArgsAppend = {"-Xmx4g"})
public class KeySnapshotBenchmark {
  static final int RECORDS = 820_000;

  /**
   * How the table was filled: {@code appended}, 820,000 keys kept (the records in the order of
   * their keys' creation); {@code churned}, as the server's table is after a while under the bench,
   * twice as many keys with a retention of half of them, so that each new key comes as an old one
   * expires, and the last record moves into each freed slot (the records in no order a sort likes).
   */
  @Param({"appended", "churned"})
  public String layout;

  private KeyTable table;
  private KeyTable.Frozen frozen;

  @Setup(Level.Trial)
  public void fill() {
    table = new KeyTable(KeyTable.Bounds.DEFAULTS);
    byte[] response = new byte[100];
    boolean churned = layout.equals("churned");
    int keys = churned ? 2 * RECORDS : RECORDS;
    long retention = churned ? RECORDS / 10 : 3_600_000; // ten keys a millisecond
    for (int i = 0; i < keys; i++) {
      KeyId id = new KeyId("bench", "4f1c2a-" + (i % 16) + "-" + i);
      long token = i + 1L;
      long now = 1_000L + i / 10;
      if (churned) {
        table.expire(now);
      }
      table.acquire(id, new byte[0], 30_000, retention, token, now);
      table.complete(id, token, response, now);
    }
    if (Math.abs(table.size() - RECORDS) > 10) {
      throw new IllegalStateException(table.size() + " records, not " + RECORDS);
    }
  }

  @Setup(Level.Invocation)
  public void freezeForTheWriter() {
    frozen = table.freeze();
  }

  @Benchmark
  public KeyTable.Frozen freeze() {
    return table.freeze();
  }

  @Benchmark
  public String write() throws IOException {
    long length = frozen.snapshotBytes();
    frozen.writeSnapshot(OutputStream.nullOutputStream());
    return frozen.digest() + length;
  }
}
