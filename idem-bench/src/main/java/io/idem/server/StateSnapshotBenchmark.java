package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.proto.Command;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.Quotas;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterRequest;
import io.idem.proto.SessionCmd;
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
  static final int SESSIONS = 256;

  @Param({"256000"})
  int keys;

  private ReplicatedState state;

  @Setup
  public void fill() {
    state = new ReplicatedState();
    long index = 0;
    long now = 1_000;
    state.apply(
        ++index,
        1,
        LogEntry.newBuilder()
            .setFormatVersion(ReplicatedState.LOG_FORMAT_VERSION)
            .setLeaderTimeMs(now++)
            .addCommands(
                Command.newBuilder()
                    .setConfigure(
                        ReplicatedConfig.DEFAULTS.bootstrapCommand(
                            "", Quotas.newBuilder().setKvBytes(16L << 30).build(), 64L << 30)))
            .build(),
        false);
    LogEntry.Builder registrations =
        LogEntry.newBuilder()
            .setFormatVersion(ReplicatedState.LOG_FORMAT_VERSION)
            .setLeaderTimeMs(now++);
    long[] ids = new long[SESSIONS];
    for (int i = 0; i < SESSIONS; i++) {
      registrations.addCommands(
          Command.newBuilder()
              .setRegister(
                  RegisterCmd.newBuilder()
                      .setSecretHash(ByteString.copyFrom(new byte[32]))
                      .setRequest(RegisterRequest.newBuilder().setTtlMs(86_400_000).setNonce(i))));
      ids[i] = (index + 1) * ReplicatedState.MAX_COMMANDS_PER_ENTRY + i;
    }
    state.apply(++index, 1, registrations.build(), false);
    ByteString value = ByteString.copyFrom(new byte[100]);
    int perSession = keys / SESSIONS;
    for (int n = 0; n < perSession; n++) {
      LogEntry.Builder e =
          LogEntry.newBuilder()
              .setFormatVersion(ReplicatedState.LOG_FORMAT_VERSION)
              .setLeaderTimeMs(now++);
      for (int s = 0; s < SESSIONS; s++) {
        Put p = Put.newBuilder().setKey("bench/" + s + "/" + n).setValue(value).build();
        e.addCommands(
            Command.newBuilder()
                .setSession(
                    SessionCmd.newBuilder()
                        .setClientId(ids[s])
                        .setSeq(n + 1)
                        .setAck(n + 1)
                        .setOp(Operation.newBuilder().setPut(p))));
      }
      state.apply(++index, 1, e.build(), false);
    }
    if (state.kv.size() != perSession * SESSIONS) {
      throw new IllegalStateException(
          "the state holds " + state.kv.size() + " keys, not " + perSession * SESSIONS);
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
