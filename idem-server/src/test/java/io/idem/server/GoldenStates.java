package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.proto.AcquireKey;
import io.idem.proto.Append;
import io.idem.proto.AuthCmd;
import io.idem.proto.AuthRequest;
import io.idem.proto.Command;
import io.idem.proto.CompleteKey;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.Fence;
import io.idem.proto.GrantLease;
import io.idem.proto.Increment;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Permission;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Role;
import io.idem.proto.SessionBounds;
import io.idem.proto.SessionCmd;
import io.idem.proto.UserRoles;
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
   * and a duplicate, then a tick. Version 3 starts with a bootstrap configuration entry. Version 4
   * adds, before the tick, application idempotency keys (one completed, one taken over after its
   * deadline) and two fenced puts (one stale, refused; one current, applied). Version 6 bootstraps
   * at log format 6 and adds, before the tick, access control: a role, a principal holding it, and
   * auth turned on with an admin. Version 7 bootstraps at log format 7, so that what the sessions
   * add has an owner (the anonymous principal), and adds, before the tick, a role with quotas and
   * the admin's change of the default quotas and the backend budget. Version 8 adds, before the
   * tick, a put fenced by the completed key's token after its owner's deadline: refused in format 8
   * (a format 7 entry would let it through).
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
                          .setLogFormat(version >= 6 ? version : 0)
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
    long done = 0; // the completed key's token (version 4 and later)
    if (version >= 4) {
      long b = a + 1;
      Operation.Builder acquire =
          Operation.newBuilder()
              .setAcquireKey(
                  AcquireKey.newBuilder()
                      .setScope("t")
                      .setFingerprint(ByteString.copyFromUtf8("fp"))
                      .setInProgressMs(50)
                      .setRetentionMs(60_000));
      done = (log.size() + 1L) * ReplicatedState.MAX_COMMANDS_PER_ENTRY; // its token
      log.add(
          entry(
              version,
              1_210,
              op(a, 4, 3, setKey(acquire, "done")),
              op(b, 2, 1, setKey(acquire, "taken"))));
      long first = done + 1;
      log.add(
          entry(
              version,
              1_220,
              op(
                  a,
                  5,
                  4,
                  Operation.newBuilder()
                      .setCompleteKey(
                          CompleteKey.newBuilder()
                              .setScope("t")
                              .setKey("done")
                              .setToken(done)
                              .setResponse(ByteString.copyFromUtf8("200 OK")))
                      .build())));
      long second = (log.size() + 1L) * ReplicatedState.MAX_COMMANDS_PER_ENTRY;
      log.add(entry(version, 1_270, op(a, 6, 5, setKey(acquire, "taken"))));
      log.add(
          entry(
              version,
              1_280,
              op(b, 3, 2, fencedPut("stale", "taken", first)),
              op(a, 7, 6, fencedPut("paid", "taken", second))));
    }
    if (version >= 6) {
      Role tenant =
          Role.newBuilder()
              .setName("tenant-a")
              .addPermissions(
                  Permission.newBuilder()
                      .setKind(Permission.Kind.KV_READ_WRITE)
                      .setPrefix("tenant-a/"))
              .addPermissions(
                  Permission.newBuilder().setKind(Permission.Kind.KEY_SCOPE).setPrefix("tenant-a"))
              .build();
      log.add(
          entry(
              version,
              1_290,
              auth(AuthRequest.newBuilder().setPutRole(tenant)),
              auth(
                  AuthRequest.newBuilder()
                      .setGrant(UserRoles.newBuilder().setPrincipal("CN=a").addRoles("tenant-a"))),
              auth(AuthRequest.newBuilder().setEnableWithAdmin("CN=admin"))));
    }
    if (version >= 7) {
      Role bulk =
          Role.newBuilder()
              .setName("bulk")
              .addPermissions(
                  Permission.newBuilder().setKind(Permission.Kind.KEY_SCOPE).setPrefix("bulk"))
              .setQuotas(
                  io.idem.proto.Quotas.newBuilder().setKeyRecords(500_000).setKvBytes(1L << 30))
              .build();
      log.add(
          entry(
              version,
              1_295,
              Command.newBuilder()
                  .setAuth(
                      AuthCmd.newBuilder()
                          .setPrincipal("CN=admin")
                          .setRequest(AuthRequest.newBuilder().setPutRole(bulk)))
                  .build(),
              Command.newBuilder()
                  .setConfigure(
                      ConfigureCmd.newBuilder()
                          .setPrincipal("CN=admin")
                          .setQuotas(io.idem.proto.Quotas.newBuilder().setKeyRecords(1_000))
                          .setBackendBytes(8L << 20))
                  .build()));
    }
    if (version >= 8) {
      // "done" was acquired at 1_210 for 50 ms: its owner's deadline is 1_260.
      log.add(entry(version, 1_297, op(a, 8, 7, fencedPut("late", "done", done))));
    }
    log.add(entry(version, 1_300));
    return log;
  }

  /** An access-control change by a caller without a principal (allowed while auth is off). */
  static Command auth(AuthRequest.Builder request) {
    return Command.newBuilder()
        .setAuth(AuthCmd.newBuilder().setPrincipal("").setRequest(request))
        .build();
  }

  private static Operation setKey(Operation.Builder acquire, String key) {
    Operation.Builder b = acquire.clone();
    b.getAcquireKeyBuilder().setKey(key);
    return b.build();
  }

  private static Operation fencedPut(String key, String fenceKey, long token) {
    return Operation.newBuilder()
        .setPut(
            Put.newBuilder()
                .setKey(key)
                .setValue(ByteString.copyFromUtf8("v"))
                .setFence(Fence.newBuilder().setScope("t").setKey(fenceKey).setToken(token)))
        .build();
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
