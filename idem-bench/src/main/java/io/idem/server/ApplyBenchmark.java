package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.proto.AcquireKey;
import io.idem.proto.Command;
import io.idem.proto.CompleteKey;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.Quotas;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterRequest;
import io.idem.proto.SessionCmd;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What the accounting of quotas costs the apply thread (issue 32): the replicated state applying
 * entries of {@value #PER_ENTRY} session commands from {@value #SESSIONS} anonymous sessions, in
 * log format 6 (no quotas, no owners, no budget) and 7 (every command judged by its principal's
 * quotas and the budget, and charged). Same code, same commands; only the entries' format differs.
 * {@code put}: 100-byte values over 64,000 keys. {@code keyed}: an entry of acquires of new keys,
 * then one completing them with a 100-byte response (retention 2 s of log time, so records expire
 * as fast as they come). Scores are commands per second.
 *
 * <p>In {@code idem-bench} but in the server's package, which it needs ({@link ReplicatedState} is
 * package-private): {@code java -jar idem-bench/target/benchmarks.jar ApplyBenchmark}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class ApplyBenchmark {
  static final int SESSIONS = 256;
  static final int PER_ENTRY = 256;

  @Param({"6", "7"})
  int format;

  /** The keys that {@link #put} cycles through. */
  int keySpace = 64_000;

  ReplicatedState state;
  private long index;
  private long now;
  private final long[] ids = new long[SESSIONS];
  private final long[] nextSeq = new long[SESSIONS];
  private long keyCounter;
  private long putCounter;
  private final ByteString value = ByteString.copyFrom(new byte[100]);

  @Setup(Level.Iteration)
  public void setUp() {
    state = new ReplicatedState();
    index = 0;
    now = 1_000;
    Quotas big =
        Quotas.newBuilder()
            .setKeyRecords(10_000_000)
            .setKeyBytes(16L << 30)
            .setKvBytes(16L << 30)
            .build();
    ConfigureCmd bootstrap =
        ReplicatedConfig.DEFAULTS.bootstrapCommand("", big, 64L << 30).toBuilder()
            .setLogFormat(format)
            .build();
    apply(LogEntry.newBuilder().addCommands(Command.newBuilder().setConfigure(bootstrap)));
    LogEntry.Builder registrations = LogEntry.newBuilder();
    for (int i = 0; i < SESSIONS; i++) {
      registrations.addCommands(
          Command.newBuilder()
              .setRegister(
                  RegisterCmd.newBuilder()
                      .setSecretHash(ByteString.copyFrom(new byte[32]))
                      .setRequest(RegisterRequest.newBuilder().setTtlMs(86_400_000).setNonce(i))));
      ids[i] = (index + 1) * ReplicatedState.MAX_COMMANDS_PER_ENTRY + i;
      nextSeq[i] = 1;
    }
    apply(registrations);
  }

  private void apply(LogEntry.Builder e) {
    state.apply(++index, 1, e.setFormatVersion(format).setLeaderTimeMs(now++).build(), false);
  }

  private Command session(int s, Operation op) {
    long seq = nextSeq[s]++;
    return Command.newBuilder()
        .setSession(SessionCmd.newBuilder().setClientId(ids[s]).setSeq(seq).setAck(seq).setOp(op))
        .build();
  }

  @Benchmark
  @OperationsPerInvocation(PER_ENTRY)
  public long put() {
    LogEntry.Builder e = LogEntry.newBuilder();
    for (int i = 0; i < PER_ENTRY; i++) {
      long n = putCounter++;
      Put p = Put.newBuilder().setKey("bench/" + (n % keySpace)).setValue(value).build();
      e.addCommands(session(i % SESSIONS, Operation.newBuilder().setPut(p).build()));
    }
    apply(e);
    return index;
  }

  @Benchmark
  @OperationsPerInvocation(2 * PER_ENTRY)
  public long keyed() {
    LogEntry.Builder acquires = LogEntry.newBuilder();
    long first = keyCounter;
    for (int i = 0; i < PER_ENTRY; i++) {
      AcquireKey a =
          AcquireKey.newBuilder()
              .setScope("bench")
              .setKey("k" + keyCounter++)
              .setInProgressMs(10_000)
              .setRetentionMs(2_000)
              .build();
      acquires.addCommands(session(i % SESSIONS, Operation.newBuilder().setAcquireKey(a).build()));
    }
    apply(acquires);
    long tokens = index * ReplicatedState.MAX_COMMANDS_PER_ENTRY;
    LogEntry.Builder completes = LogEntry.newBuilder();
    for (int i = 0; i < PER_ENTRY; i++) {
      CompleteKey c =
          CompleteKey.newBuilder()
              .setScope("bench")
              .setKey("k" + (first + i))
              .setToken(tokens + i)
              .setResponse(value)
              .build();
      completes.addCommands(
          session(i % SESSIONS, Operation.newBuilder().setCompleteKey(c).build()));
    }
    apply(completes);
    return index;
  }
}
