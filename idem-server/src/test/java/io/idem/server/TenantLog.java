package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.proto.AcquireKey;
import io.idem.proto.AuthCmd;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Permission;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Result;
import io.idem.proto.Role;
import io.idem.proto.SessionCmd;
import io.idem.proto.UserRoles;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A replicated state and the log applied to it, one command per entry, for the tests of access
 * control and quotas: two tenants ({@link #A}, {@link #B}) and an admin, sessions that number their
 * requests, and a check that a replica replaying the log reaches the same state. Entries are
 * written in {@link #version}, which a test may lower.
 */
final class TenantLog {
  static final String ADMIN = "CN=admin";
  static final String A = "CN=tenant-a";
  static final String B = "CN=tenant-b";

  final ReplicatedState state = new ReplicatedState();
  final List<LogEntry> log = new ArrayList<>();
  private final Map<Long, Long> seqs = new HashMap<>();
  private long index;

  /** The log format of the entries written next. */
  int version = ReplicatedState.LOG_FORMAT_VERSION;

  CommandResult apply(Command c) {
    LogEntry e =
        LogEntry.newBuilder()
            .setFormatVersion(version)
            .setLeaderTimeMs(1_000 + index)
            .addCommands(c)
            .build();
    log.add(e);
    return state.apply(++index, 1, e, true).getResults(0);
  }

  /**
   * Bootstraps with {@link #ADMIN} as the admin, and gives each tenant a role of its own:
   * read-write on {@code tenant-x/}, key scope {@code tenant-x}, leases under {@code tenant-x/}.
   */
  TenantLog twoTenantsAndAnAdmin() {
    apply(
        Command.newBuilder()
            .setConfigure(
                ReplicatedConfig.DEFAULTS.bootstrapCommand(ADMIN).toBuilder().setPrincipal(""))
            .build());
    assertThat(state.auth.enabled()).isTrue();
    assertThat(auth(ADMIN, AuthRequest.newBuilder().setPutRole(tenant("a", "tenant-a"))).getCode())
        .isEqualTo(Code.OK);
    assertThat(auth(ADMIN, AuthRequest.newBuilder().setPutRole(tenant("b", "tenant-b"))).getCode())
        .isEqualTo(Code.OK);
    auth(
        ADMIN,
        AuthRequest.newBuilder().setGrant(UserRoles.newBuilder().setPrincipal(A).addRoles("a")));
    auth(
        ADMIN,
        AuthRequest.newBuilder().setGrant(UserRoles.newBuilder().setPrincipal(B).addRoles("b")));
    return this;
  }

  AuthReply auth(String principal, AuthRequest.Builder req) {
    return apply(
            Command.newBuilder()
                .setAuth(AuthCmd.newBuilder().setPrincipal(principal).setRequest(req))
                .build())
        .getAuth();
  }

  ConfigureReply configure(String principal, ConfigureCmd.Builder cmd) {
    return apply(Command.newBuilder().setConfigure(cmd.setPrincipal(principal)).build())
        .getConfigured();
  }

  static Role tenant(String name, String prefix) {
    return Role.newBuilder()
        .setName(name)
        .addPermissions(perm(Permission.Kind.KV_READ_WRITE, prefix + "/"))
        .addPermissions(perm(Permission.Kind.KEY_SCOPE, prefix))
        .addPermissions(perm(Permission.Kind.LEASE, prefix + "/"))
        .build();
  }

  static Permission perm(Permission.Kind kind, String prefix) {
    return Permission.newBuilder().setKind(kind).setPrefix(prefix).build();
  }

  /** A registration by {@code principal}, named {@code name} ("" for none), with a 60 s TTL. */
  RegisterReply register(String principal, String name, long nonce) {
    return apply(
            Command.newBuilder()
                .setRegister(
                    RegisterCmd.newBuilder()
                        .setPrincipal(principal)
                        .setSecretHi(nonce)
                        .setSecretLo(nonce)
                        .setRequest(
                            RegisterRequest.newBuilder()
                                .setName(name)
                                .setTtlMs(60_000)
                                .setNonce(nonce)))
                .build())
        .getRegistration();
  }

  /** Sends {@code op} as session {@code s}'s next request, acknowledging every earlier answer. */
  Result send(RegisterReply s, Operation op) {
    return send(s, op, true);
  }

  /** As {@link #send(RegisterReply, Operation)}; without {@code ack}, acknowledging none. */
  Result send(RegisterReply s, Operation op, boolean ack) {
    long seq = seqs.merge(s.getClientId(), 1L, Long::sum);
    return apply(
            Command.newBuilder()
                .setSession(
                    SessionCmd.newBuilder()
                        .setClientId(s.getClientId())
                        .setEpoch(s.getEpoch())
                        .setSeq(seq)
                        .setAck(ack ? seq : 1)
                        .setOp(op))
                .build())
        .getFrame()
        .getResult();
  }

  static Operation put(String key, String value) {
    return put(key, ByteString.copyFromUtf8(value));
  }

  static Operation put(String key, ByteString value) {
    return Operation.newBuilder().setPut(Put.newBuilder().setKey(key).setValue(value)).build();
  }

  static Operation acquire(String scope, String key) {
    return Operation.newBuilder()
        .setAcquireKey(
            AcquireKey.newBuilder()
                .setScope(scope)
                .setKey(key)
                .setInProgressMs(10_000)
                .setRetentionMs(60_000))
        .build();
  }

  /** A replica that applies the same log, as a follower does. */
  ReplicatedState replay() {
    ReplicatedState twin = new ReplicatedState();
    long i = 0;
    for (LogEntry e : log) {
      twin.apply(++i, 1, e, false);
    }
    return twin;
  }

  /** A replica that applies the same log reaches the same state. */
  void assertReplicaAgrees() {
    assertThat(StateSnapshot.digest(replay())).isEqualTo(StateSnapshot.digest(state));
  }
}
