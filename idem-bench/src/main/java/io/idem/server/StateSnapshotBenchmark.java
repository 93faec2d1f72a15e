package io.idem.server;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What one snapshot of the whole replicated state costs the snapshot writer's thread: the state
 * that {@code idem bench --workload put --sessions 256} leaves ({@code keys} keys of 100 bytes
 * written by 256 sessions), frozen, then written as {@code SnapshotWriter} writes it (an MD5 of the
 * file's bytes, to nowhere) and its digest taken. The freeze's own cost is {@code
 * SnapshotBenchmark}'s; here it is a copy of the key array.
 *
 * <p>{@code java -jar idem-bench/target/benchmarks.jar StateSnapshotBenchmark}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class StateSnapshotBenchmark {
  @Param({"256000"})
  int keys;

  private ReplicatedState state;

  /** Applies puts of 256 sessions, as {@link ApplyBenchmark} does, until every key is written. */
  @Setup
  public void fill() {
    ApplyBenchmark apply = new ApplyBenchmark();
    apply.format = ReplicatedState.LOG_FORMAT_VERSION;
    apply.keySpace = keys;
    apply.setUp();
    for (int i = 0; i < keys / ApplyBenchmark.PER_ENTRY; i++) {
      apply.put();
    }
    state = apply.state;
    if (state.kv.size() != keys) {
      throw new IllegalStateException("the state holds " + state.kv.size() + " keys, not " + keys);
    }
  }

  /** Freezes the state, writes it through an MD5 to nowhere, and takes its digest. */
  @Benchmark
  public String snapshot() throws IOException, NoSuchAlgorithmException {
    StateSnapshot.Frozen frozen = StateSnapshot.freeze(state);
    MessageDigest md5 = MessageDigest.getInstance("MD5");
    try (OutputStream out =
        new BufferedOutputStream(
            new DigestOutputStream(OutputStream.nullOutputStream(), md5), 1 << 16)) {
      frozen.write(out);
    }
    return frozen.digest();
  }
}
