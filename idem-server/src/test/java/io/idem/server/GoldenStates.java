package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.proto.Append;
import io.idem.proto.Command;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.GrantLease;
import io.idem.proto.Increment;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterRequest;
import io.idem.proto.SessionBounds;
import io.idem.proto.SessionCmd;
import java.util.ArrayList;
import java.util.List;

/** The log whose state the snapshot golden files hold. */
final class GoldenStates {
  private GoldenStates() {}

  static Command register(String name, long nonce) {
    return Command.newBuilder()
        .setRegister(
            RegisterCmd.newBuilder()
                .setRequest(
                    RegisterRequest.newBuilder().setName(name).setTtlMs(60_000).setNonce(nonce))
                .setSecretHi(0x0123456789abcdefL)
                .setSecretLo(nonce))
        .build();
  }

  static Command op(long clientId, long seq, long ack, Operation op) {
    return Command.newBuilder()
        .setSession(SessionCmd.newBuilder().setClientId(clientId).setSeq(seq).setAck(ack).setOp(op))
        .build();
  }

  static LogEntry entry(int version, long time, Command... commands) {
    return LogEntry.newBuilder()
        .setFormatVersion(version)
        .setLeaderTimeMs(time)
        .addAllCommands(List.of(commands))
        .build();
  }

  /**
   * The golden log in format {@code version}: registrations, a lease with a key, a list, a counter
   * and a duplicate, then a tick. Version 3 starts with a bootstrap configuration entry.
   */
  static List<LogEntry> log(int version) {
    List<LogEntry> log = new ArrayList<>();
    if (version >= 3) {
      log.add(
          entry(
              version,
              900,
              Command.newBuilder()
                  .setConfigure(
                      ConfigureCmd.newBuilder()
                          .setBootstrap(true)
                          .setLimits(
                              io.idem.proto.Limits.newBuilder()
                                  .setMaxKeyBytes(100)
                                  .setMaxValueBytes(1000)
                                  .setMaxNameChars(10)
                                  .setMaxLeaseTtlMs(60_000))
                          .setSessions(
                              SessionBounds.newBuilder()
                                  .setWindow(16)
                                  .setMaxSessions(100)
                                  .setMaxTtlMs(3_600_000)
                                  .setMaxNameChars(64)))
                  .build()));
    }
    long a = (log.size() + 1L) * ReplicatedState.MAX_COMMANDS_PER_ENTRY;
    log.add(entry(version, 1_000, register("a", 11), register("", 12)));
    log.add(
        entry(
            version,
            1_100,
            op(
                a,
                1,
                1,
                Operation.newBuilder()
                    .setGrantLease(GrantLease.newBuilder().setName("lock").setTtlMs(30_000))
                    .build()),
            op(
                a,
                2,
                1,
                Operation.newBuilder()
                    .setPut(
                        Put.newBuilder()
                            .setKey("k")
                            .setValue(ByteString.copyFromUtf8("v"))
                            .setLease("lock"))
                    .build())));
    Operation incr =
        Operation.newBuilder().setIncrement(Increment.newBuilder().setKey("n").setDelta(5)).build();
    log.add(
        entry(
            version,
            1_200,
            op(
                a,
                3,
                2,
                Operation.newBuilder()
                    .setAppend(
                        Append.newBuilder().setKey("list").setValue(ByteString.copyFromUtf8("x")))
                    .build()),
            op(a + 1, 1, 1, incr),
            op(a + 1, 1, 1, incr)));
    log.add(entry(version, 1_300));
    return log;
  }

  /** The state after applying {@link #log}. */
  static ReplicatedState state(int version) {
    ReplicatedState s = new ReplicatedState();
    long i = 0;
    for (LogEntry e : log(version)) {
      s.apply(++i, 1, e, false);
    }
    return s;
  }
}
