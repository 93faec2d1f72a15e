package io.idem.server;

import static io.idem.server.TenantLog.A;
import static io.idem.server.TenantLog.ADMIN;
import static io.idem.server.TenantLog.B;
import static io.idem.server.TenantLog.acquire;
import static io.idem.server.TenantLog.put;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CompleteKey;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import io.idem.proto.Fence;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GrantLease;
import io.idem.proto.Limits;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ReleaseKey;
import io.idem.proto.Result;
import io.idem.proto.UserRoles;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Access control in the state machine (log format 6): two tenants and an admin. Every refusal is
 * {@code PERMISSION_DENIED}, changes nothing the other tenant owns, and every replica decides
 * alike.
 */
class AuthStateTest {
  private final TenantLog t = new TenantLog();
  private final ReplicatedState state = t.state;

  @BeforeEach
  void twoTenantsAndAnAdmin() {
    t.twoTenantsAndAnAdmin();
  }

  @Test
  void aTenantCannotTouchAnotherTenantsKeysValuesOrLeases() {
    RegisterReply a = t.register(A, "", 1);
    RegisterReply b = t.register(B, "", 2);
    assertThat(t.send(a, put("tenant-a/balance", "100")).getCode()).isEqualTo(Code.OK);
    Result acquired = t.send(a, acquire("tenant-a", "order-1"));
    assertThat(acquired.getToken()).isPositive();
    assertThat(
            t.send(
                    a,
                    Operation.newBuilder()
                        .setGrantLease(
                            GrantLease.newBuilder().setName("tenant-a/leader").setTtlMs(10_000))
                        .build())
                .getCode())
        .isEqualTo(Code.OK);
    String kvBefore = kvAndKeys();

    List<Operation> attacks =
        List.of(
            put("tenant-a/balance", "0"),
            acquire("tenant-a", "order-1"),
            Operation.newBuilder()
                .setReleaseKey(
                    ReleaseKey.newBuilder()
                        .setScope("tenant-a")
                        .setKey("order-1")
                        .setToken(acquired.getToken()))
                .build(),
            Operation.newBuilder()
                .setCompleteKey(
                    CompleteKey.newBuilder()
                        .setScope("tenant-a")
                        .setKey("order-1")
                        .setToken(acquired.getToken())
                        .setResponse(ByteString.copyFromUtf8("forged")))
                .build(),
            // Its own key, but fenced on the other tenant's key, or with an effect on its values.
            Operation.newBuilder()
                .setPut(
                    Put.newBuilder()
                        .setKey("tenant-b/x")
                        .setFence(
                            Fence.newBuilder()
                                .setScope("tenant-a")
                                .setKey("order-1")
                                .setToken(acquired.getToken())))
                .build(),
            Operation.newBuilder()
                .setGrantLease(GrantLease.newBuilder().setName("tenant-a/leader").setTtlMs(10_000))
                .build(),
            Operation.newBuilder()
                .setPut(Put.newBuilder().setKey("tenant-b/y").setLease("tenant-a/leader"))
                .build());
    for (Operation attack : attacks) {
      Result r = t.send(b, attack);
      assertThat(r.getCode()).as("%s", attack).isEqualTo(Code.PERMISSION_DENIED);
      assertThat(r.getMessage()).startsWith(B + " has no ");
    }
    assertThat(kvAndKeys()).isEqualTo(kvBefore);
    assertThat(state.get("tenant-a/balance", B).getCode()).isEqualTo(Code.PERMISSION_DENIED);
    assertThat(
            state
                .getKey(
                    GetKeyRequest.newBuilder().setScope("tenant-a").setKey("order-1").build(), B)
                .getCode())
        .isEqualTo(Code.PERMISSION_DENIED);
    assertThat(state.get("tenant-a/balance", A).getValue().toStringUtf8()).isEqualTo("100");
    assertThat(state.get("tenant-a/balance", ADMIN).getFound()).isTrue();
    // B's own things go on.
    assertThat(t.send(b, put("tenant-b/balance", "7")).getCode()).isEqualTo(Code.OK);
    assertThat(t.send(b, acquire("tenant-b", "order-1")).getCode()).isEqualTo(Code.OK);
    t.assertReplicaAgrees();
  }

  private String kvAndKeys() {
    return state.kv.size()
        + "/"
        + state.keys.digest()
        + "/"
        + state.leases.size()
        + "/"
        + state.get("tenant-a/balance").getValue().toStringUtf8();
  }

  @Test
  void onlyAnAdminChangesTheConfigurationOrAccessControl() {
    ConfigureCmd shrink =
        ConfigureCmd.newBuilder()
            .setLimits(Limits.newBuilder().setMaxValueBytes(16))
            .setPrincipal(A)
            .build();
    ConfigureReply refused =
        t.apply(Command.newBuilder().setConfigure(shrink).build()).getConfigured();
    assertThat(refused.getCode()).isEqualTo(Code.PERMISSION_DENIED);
    assertThat(refused.getMessage()).contains(A).contains("needs the role admin");
    assertThat(state.configuration.limits().maxValueBytes()).isNotEqualTo(16);
    AuthReply selfPromotion =
        t.auth(
            A,
            AuthRequest.newBuilder()
                .setGrant(UserRoles.newBuilder().setPrincipal(A).addRoles("admin")));
    assertThat(selfPromotion.getCode()).isEqualTo(Code.PERMISSION_DENIED);
    assertThat(state.auth.isAdmin(A)).isFalse();
    assertThat(t.auth("", AuthRequest.newBuilder().setDisable(true)).getCode())
        .isEqualTo(Code.PERMISSION_DENIED);

    ConfigureReply ok =
        t.apply(Command.newBuilder().setConfigure(shrink.toBuilder().setPrincipal(ADMIN)).build())
            .getConfigured();
    assertThat(ok.getCode()).isEqualTo(Code.OK);
    assertThat(state.configuration.limits().maxValueBytes()).isEqualTo(16);
    t.assertReplicaAgrees();
  }

  @Test
  void principalsWithoutARoleCannotOpenSessions() {
    assertThat(t.register("CN=stranger", "", 5).getCode()).isEqualTo(Code.PERMISSION_DENIED);
    assertThat(t.register("", "", 6).getCode()).isEqualTo(Code.PERMISSION_DENIED);
    assertThat(state.sessions.size()).isZero();
  }

  @Test
  void sessionNamesArePerPrincipal() {
    RegisterReply a = t.register(A, "orders", 1);
    RegisterReply b = t.register(B, "orders", 2);
    assertThat(a.getCode()).isEqualTo(Code.OK);
    assertThat(b.getCode()).as("the same name, another principal").isEqualTo(Code.OK);
    assertThat(b.getClientId()).isNotEqualTo(a.getClientId());
    assertThat(t.register(A, "orders", 3).getCode()).isEqualTo(Code.NAME_IN_USE);
    RegisterReply resumed =
        t.apply(
                Command.newBuilder()
                    .setRegister(
                        RegisterCmd.newBuilder()
                            .setPrincipal(B)
                            .setRequest(
                                RegisterRequest.newBuilder()
                                    .setName("orders")
                                    .setResume(true)
                                    .setSecretHi(2)
                                    .setSecretLo(2)
                                    .setNonce(4)))
                    .build())
            .getRegistration();
    assertThat(resumed.getClientId()).as("B resumes its own").isEqualTo(b.getClientId());
    t.assertReplicaAgrees();
  }

  @Test
  void inEntriesBeforeFormat6NothingIsChecked() {
    RegisterReply a = t.register(A, "", 1);
    t.version = 5;
    assertThat(t.send(a, put("tenant-b/x", "v")).getCode()).isEqualTo(Code.OK);
    assertThat(t.register("CN=stranger", "", 7).getCode()).isEqualTo(Code.OK);
    ConfigureCmd shrink =
        ConfigureCmd.newBuilder()
            .setLimits(Limits.newBuilder().setMaxValueBytes(32))
            .setPrincipal(B)
            .build();
    assertThat(t.apply(Command.newBuilder().setConfigure(shrink).build()).getConfigured().getCode())
        .isEqualTo(Code.OK);
    assertThat(t.auth(B, AuthRequest.newBuilder().setDisable(true)).getCode())
        .as("a version 5 node knows no such command")
        .isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(state.auth.enabled()).isTrue();
    t.assertReplicaAgrees();
  }

  @Test
  void theFormatInForceIsSetAtBootstrapAndOnlyRaised() {
    assertThat(state.configuration.logFormat()).isEqualTo(ReplicatedState.LOG_FORMAT_VERSION);
    ConfigureCmd lower = ConfigureCmd.newBuilder().setLogFormat(5).setPrincipal(ADMIN).build();
    ConfigureReply r = t.apply(Command.newBuilder().setConfigure(lower).build()).getConfigured();
    assertThat(r.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(r.getMessage()).contains("never lowered");

    ReplicatedState old = new ReplicatedState();
    LogEntry bootstrapByOldLeader =
        LogEntry.newBuilder()
            .setFormatVersion(5)
            .setLeaderTimeMs(1)
            .addCommands(
                Command.newBuilder().setConfigure(ConfigureCmd.newBuilder().setBootstrap(true)))
            .build();
    old.apply(1, 1, bootstrapByOldLeader, false);
    assertThat(old.configuration.logFormat()).isEqualTo(FormatState.BEFORE_THE_GATE);
    LogEntry raise =
        LogEntry.newBuilder()
            .setFormatVersion(5)
            .setLeaderTimeMs(2)
            .addCommands(
                Command.newBuilder().setConfigure(ConfigureCmd.newBuilder().setLogFormat(6)))
            .build();
    old.apply(2, 1, raise, false);
    assertThat(old.configuration.logFormat()).isEqualTo(6);
  }
}
