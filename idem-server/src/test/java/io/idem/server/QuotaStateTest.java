package io.idem.server;

import static io.idem.server.TenantLog.A;
import static io.idem.server.TenantLog.ADMIN;
import static io.idem.server.TenantLog.B;
import static io.idem.server.TenantLog.acquire;
import static io.idem.server.TenantLog.tenant;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.proto.Append;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.CompleteKey;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import io.idem.proto.Delete;
import io.idem.proto.GrantLease;
import io.idem.proto.KeyOutcome;
import io.idem.proto.Operation;
import io.idem.proto.Quotas;
import io.idem.proto.RegisterReply;
import io.idem.proto.ReleaseKey;
import io.idem.proto.Result;
import io.idem.proto.Role;
import io.idem.proto.SessionBounds;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Quotas per principal and the backend budget in the state machine (log format 7): two tenants and
 * an admin. A principal at a quota gets {@code QUOTA_EXCEEDED} naming it, and the other goes on
 * unaffected; at the budget, writes that grow the state get {@code NO_SPACE} while reads, deletes,
 * completions and releases go on, and the alarm clears once the state has shrunk. Every replica,
 * and every state restored from a snapshot, decides alike.
 */
class QuotaStateTest {
  private final TenantLog t = new TenantLog();
  private final ReplicatedState state = t.state;

  @BeforeEach
  void twoTenantsAndAnAdmin() {
    t.twoTenantsAndAnAdmin();
  }

  private AuthReply auth(AuthRequest.Builder req) {
    return t.auth(ADMIN, req);
  }

  private ConfigureReply configure(ConfigureCmd.Builder cmd) {
    return t.configure(ADMIN, cmd);
  }

  private RegisterReply register(String principal, long nonce) {
    return t.register(principal, "", nonce);
  }

  private static Operation put(String key, int bytes) {
    return TenantLog.put(key, ByteString.copyFrom(new byte[bytes]));
  }

  private static Operation delete(String key) {
    return Operation.newBuilder().setDelete(Delete.newBuilder().setKey(key)).build();
  }

  @Test
  void onePrincipalFillsItsKeyQuotaWhileAnotherAcquiresFreely() {
    assertThat(configure(ConfigureCmd.newBuilder().setQuotas(q().setKeyRecords(5))).getCode())
        .isEqualTo(Code.OK);
    Role bigB = tenant("b", "tenant-b").toBuilder().setQuotas(q().setKeyRecords(20)).build();
    assertThat(auth(AuthRequest.newBuilder().setPutRole(bigB)).getCode()).isEqualTo(Code.OK);
    RegisterReply a = register(A, 1);
    RegisterReply b = register(B, 2);
    for (int i = 0; i < 5; i++) {
      assertThat(t.send(a, acquire("tenant-a", "k" + i)).getKeyOutcome())
          .isEqualTo(KeyOutcome.ACQUIRED);
    }
    String before = StateSnapshot.digest(state);
    Result refused = t.send(a, acquire("tenant-a", "k5"));
    assertThat(refused.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(refused.getMessage())
        .contains("quota key_records", A, "is 5", "5 key records", "idem config set --quota");
    // Only the saved refusal and the session's acknowledgement changed: no key record.
    assertThat(state.keys.size()).isEqualTo(5);
    assertThat(StateSnapshot.digest(state)).isNotEqualTo(before);
    // An existing key of its own is answered as ever.
    assertThat(t.send(a, acquire("tenant-a", "k0")).getKeyOutcome())
        .isEqualTo(KeyOutcome.IN_PROGRESS);
    // B, whose role gives it 20, acquires all of them while A stays at its 5.
    for (int i = 0; i < 20; i++) {
      assertThat(t.send(b, acquire("tenant-b", "k" + i)).getKeyOutcome())
          .as("tenant b's key %d", i)
          .isEqualTo(KeyOutcome.ACQUIRED);
    }
    assertThat(t.send(b, acquire("tenant-b", "k20")).getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(state.keys.table().usageOf(A).records()).isEqualTo(5);
    assertThat(state.keys.table().usageOf(B).records()).isEqualTo(20);
    assertReplicaAgrees();
  }

  @Test
  void aRoleRaisesItsPrincipalsQuotaAndAFreedRecordMakesRoom() {
    configure(ConfigureCmd.newBuilder().setQuotas(q().setKeyRecords(2)));
    Role bigger = tenant("a", "tenant-a").toBuilder().setQuotas(q().setKeyRecords(3)).build();
    assertThat(auth(AuthRequest.newBuilder().setPutRole(bigger)).getCode()).isEqualTo(Code.OK);
    RegisterReply a = register(A, 1);
    for (int i = 0; i < 3; i++) {
      assertThat(t.send(a, acquire("tenant-a", "k" + i)).getKeyOutcome())
          .isEqualTo(KeyOutcome.ACQUIRED);
    }
    assertThat(t.send(a, acquire("tenant-a", "k3")).getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    // A release frees its record; a completion is never refused, and keeps the record.
    long token = state.keys.table().currentToken(new io.idem.core.KeyTable.KeyId("tenant-a", "k0"));
    assertThat(
            t.send(
                    a,
                    Operation.newBuilder()
                        .setReleaseKey(
                            ReleaseKey.newBuilder()
                                .setScope("tenant-a")
                                .setKey("k0")
                                .setToken(token))
                        .build())
                .getKeyOutcome())
        .isEqualTo(KeyOutcome.SETTLED);
    assertThat(t.send(a, acquire("tenant-a", "k3")).getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);
    assertThat(state.keys.table().usageOf(A).records()).isEqualTo(3);
    assertReplicaAgrees();
  }

  @Test
  void everyQuotaRefusesWithItsNameAndTheOtherPrincipalGoesOn() {
    configure(
        ConfigureCmd.newBuilder()
            .setQuotas(
                q().setSessions(2)
                    .setKvKeys(2)
                    .setKvBytes(10_000)
                    .setLeases(1)
                    .setListLength(2)
                    .setSavedBytes(1 << 20)));
    RegisterReply a = register(A, 1);
    register(A, 2);
    RegisterReply third = register(A, 3);
    assertThat(third.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(third.getMessage()).contains("quota sessions", "2 live sessions");
    RegisterReply b = register(B, 4);
    assertThat(b.getCode()).isEqualTo(Code.OK);

    assertThat(t.send(a, put("tenant-a/1", 10)).getCode()).isEqualTo(Code.OK);
    assertThat(t.send(a, put("tenant-a/2", 10)).getCode()).isEqualTo(Code.OK);
    Result keys = t.send(a, put("tenant-a/3", 10));
    assertThat(keys.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(keys.getMessage()).contains("quota kv_keys", "2 keys");
    // Overwriting its own key is no new key; growing it past kv_bytes is refused.
    assertThat(t.send(a, put("tenant-a/1", 5_000)).getCode()).isEqualTo(Code.OK);
    Result bytes = t.send(a, put("tenant-a/2", 6_000));
    assertThat(bytes.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(bytes.getMessage()).contains("quota kv_bytes");
    // Deleting always goes through, and makes room.
    assertThat(t.send(a, delete("tenant-a/1")).getDone()).isTrue();
    assertThat(t.send(a, put("tenant-a/3", 10)).getCode()).isEqualTo(Code.OK);

    Operation lease =
        Operation.newBuilder()
            .setGrantLease(GrantLease.newBuilder().setName("tenant-a/l1").setTtlMs(30_000))
            .build();
    assertThat(t.send(a, lease).getCode()).isEqualTo(Code.OK);
    Result leases =
        t.send(
            a,
            Operation.newBuilder()
                .setGrantLease(GrantLease.newBuilder().setName("tenant-a/l2").setTtlMs(30_000))
                .build());
    assertThat(leases.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(leases.getMessage()).contains("quota leases", "1 leases");

    // B owns nothing of A's quotas: the same writes go through.
    for (int i = 0; i < 2; i++) {
      assertThat(t.send(b, put("tenant-b/" + i, 10)).getCode()).isEqualTo(Code.OK);
    }
    assertThat(state.kv.keysOf(A)).isEqualTo(2);
    assertThat(state.kv.keysOf(B)).isEqualTo(2);
    assertThat(state.leases.countOf(A)).isEqualTo(1);
    assertReplicaAgrees();
  }

  @Test
  void aListStopsAtItsPrincipalsListLength() {
    configure(ConfigureCmd.newBuilder().setQuotas(q().setListLength(2)));
    RegisterReply a = register(A, 1);
    Operation append =
        Operation.newBuilder()
            .setAppend(
                Append.newBuilder().setKey("tenant-a/log").setValue(ByteString.copyFromUtf8("x")))
            .build();
    assertThat(t.send(a, append).getNumber()).isEqualTo(1);
    assertThat(t.send(a, append).getNumber()).isEqualTo(2);
    Result third = t.send(a, append);
    assertThat(third.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(third.getMessage()).contains("quota list_length", "2 elements");
    assertThat(state.get("tenant-a/log", A).getElementsCount()).isEqualTo(2);
  }

  @Test
  void savedAnswersAreBoundedPerPrincipalUntilAcknowledged() {
    configure(ConfigureCmd.newBuilder().setQuotas(q().setSavedBytes(2_000)));
    RegisterReply a = register(A, 1);
    // Completed keys answer acquires with their stored response: big saved answers.
    assertThat(t.send(a, acquire("tenant-a", "k")).getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);
    long token = state.keys.table().currentToken(new io.idem.core.KeyTable.KeyId("tenant-a", "k"));
    t.send(
        a,
        Operation.newBuilder()
            .setCompleteKey(
                CompleteKey.newBuilder()
                    .setScope("tenant-a")
                    .setKey("k")
                    .setToken(token)
                    .setResponse(ByteString.copyFrom(new byte[900])))
            .build());
    // Never acknowledging: each replay of the 900-byte response is saved.
    int answered = 0;
    Result r;
    do {
      r = t.send(a, acquire("tenant-a", "k"), false);
      answered++;
    } while (r.getCode() == Code.OK && answered < 10);
    assertThat(r.getCode()).isEqualTo(Code.QUOTA_EXCEEDED);
    assertThat(r.getMessage()).contains("quota saved_bytes", "acknowledge answers");
    assertThat(answered).isBetween(2, 4);
    // What settles or shrinks goes through even at the quota: a delete of a key it never wrote.
    assertThat(t.send(a, delete("tenant-a/none"), false).getCode()).isEqualTo(Code.OK);
    // Acknowledging frees them: the next request goes through.
    assertThat(t.send(a, acquire("tenant-a", "k"), true).getKeyOutcome())
        .isEqualTo(KeyOutcome.COMPLETED);
    assertReplicaAgrees();
  }

  @Test
  void theBackendAlarmIsRaisedAtTheBudgetAndClearedBelowNinetyPercent() {
    long budget = QuotaState.MIN_BACKEND_BYTES;
    assertThat(configure(ConfigureCmd.newBuilder().setBackendBytes(budget)).getCode())
        .isEqualTo(Code.OK);
    RegisterReply a = register(A, 1);
    RegisterReply b = register(B, 2);
    int written = 0;
    Result r;
    do {
      r = t.send(a, put("tenant-a/" + written, 50_000));
      written++;
    } while (r.getCode() == Code.OK && written < 100);
    assertThat(r.getCode()).isEqualTo(Code.NO_SPACE);
    assertThat(r.getMessage()).contains("backend budget", "of " + budget + " bytes");
    assertThat(state.configuration.quotas.alarm()).isTrue();
    // Every principal is refused growth: B's put, a new session, a lease, a new key.
    assertThat(t.send(b, put("tenant-b/x", 10)).getCode()).isEqualTo(Code.NO_SPACE);
    assertThat(register(B, 3).getCode()).isEqualTo(Code.NO_SPACE);
    assertThat(
            t.send(
                    b,
                    Operation.newBuilder()
                        .setGrantLease(
                            GrantLease.newBuilder().setName("tenant-b/l").setTtlMs(30_000))
                        .build())
                .getCode())
        .isEqualTo(Code.NO_SPACE);
    assertThat(t.send(b, acquire("tenant-b", "new")).getCode()).isEqualTo(Code.NO_SPACE);
    // Reads, and a write that does not grow, still work.
    assertThat(state.get("tenant-a/0", A).getFound()).isTrue();
    assertThat(t.send(a, put("tenant-a/0", 10)).getCode()).isEqualTo(Code.OK);
    // Deletes shrink the state; once below 90% of the budget the alarm clears.
    int deleted = 1;
    while (state.configuration.quotas.alarm() && deleted < written) {
      assertThat(t.send(a, delete("tenant-a/" + deleted)).getCode()).isEqualTo(Code.OK);
      deleted++;
    }
    assertThat(state.configuration.quotas.alarm()).isFalse();
    assertThat(state.backendUsed()).isLessThan(budget / 100 * QuotaState.CLEAR_PERCENT);
    assertThat(t.send(b, put("tenant-b/x", 10)).getCode()).isEqualTo(Code.OK);
    assertReplicaAgrees();
  }

  @Test
  void aConfigurationIsHeldToTheHardRanges() {
    ConfigureReply window =
        configure(
            ConfigureCmd.newBuilder().setSessions(SessionBounds.newBuilder().setWindow(4096)));
    assertThat(window.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(window.getMessage()).contains("window must be in [1, 1024]");
    ConfigureReply ttl =
        configure(
            ConfigureCmd.newBuilder()
                .setSessions(SessionBounds.newBuilder().setMaxTtlMs(86_400_001L)));
    assertThat(ttl.getMessage()).contains("max_ttl_ms must be in [1, 86400000]");
    ConfigureReply quota = configure(ConfigureCmd.newBuilder().setQuotas(q().setSessions(-1)));
    assertThat(quota.getMessage()).contains("quotas.sessions must be in [1, 1000000]");
    ConfigureReply backend = configure(ConfigureCmd.newBuilder().setBackendBytes(1));
    assertThat(backend.getMessage()).contains("backend_bytes must be in [1048576");
    Role huge = tenant("a", "tenant-a").toBuilder().setQuotas(q().setKvBytes(1L << 50)).build();
    AuthReply role = auth(AuthRequest.newBuilder().setPutRole(huge));
    assertThat(role.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(role.getMessage()).contains("quotas.kv_bytes");
    // A refused change changes nothing, not even its valid parts.
    assertThat(
            configure(
                    ConfigureCmd.newBuilder()
                        .setQuotas(q().setKeyRecords(7))
                        .setSessions(SessionBounds.newBuilder().setWindow(5000)))
                .getCode())
        .isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(state.configuration.quotas.defaults().keyRecords())
        .isEqualTo(io.idem.server.Quotas.DEFAULTS.keyRecords());
    assertThat(state.sessions.bounds().window())
        .isEqualTo(ReplicatedConfig.DEFAULTS.sessions().window());
  }

  @Test
  void inEntriesBeforeFormat7NothingIsChargedOrRefused() {
    t.version = 6;
    configure(ConfigureCmd.newBuilder().setQuotas(q().setKvKeys(1)).setBackendBytes(1 << 20));
    assertThat(state.configuration.quotas.pristine()).as("format 6 ignores quotas").isTrue();
    assertThat(
            configure(
                    ConfigureCmd.newBuilder()
                        .setSessions(SessionBounds.newBuilder().setWindow(4096)))
                .getCode())
        .as("format 6 ranges")
        .isEqualTo(Code.OK);
    RegisterReply a = register(A, 1);
    for (int i = 0; i < 3; i++) {
      assertThat(t.send(a, put("tenant-a/" + i, 10)).getCode()).isEqualTo(Code.OK);
    }
    assertThat(state.kv.keysOf(A)).isZero();
    Role withQuotas = tenant("a", "tenant-a").toBuilder().setQuotas(q().setKvKeys(9)).build();
    auth(AuthRequest.newBuilder().setPutRole(withQuotas));
    assertThat(state.auth.view(AuthReply.newBuilder()).getRolesList())
        .filteredOn(r -> r.getName().equals("a"))
        .allSatisfy(r -> assertThat(r.hasQuotas()).isFalse());
    assertReplicaAgrees();
  }

  private static Quotas.Builder q() {
    return Quotas.newBuilder();
  }

  /**
   * A replica that applies the same log reaches the same state, and so does one restored from a
   * snapshot of it: the same digest, the same usage, the same alarm.
   */
  private void assertReplicaAgrees() {
    ReplicatedState twin = t.replay();
    assertThat(StateSnapshot.digest(twin)).isEqualTo(StateSnapshot.digest(state));
    assertThat(twin.backendUsed()).isEqualTo(state.backendUsed());
    ReplicatedState restored;
    try {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      StateSnapshot.write(state, out);
      restored = StateSnapshot.read(new ByteArrayInputStream(out.toByteArray()));
    } catch (IOException e) {
      throw new AssertionError(e);
    }
    assertThat(StateSnapshot.digest(restored)).isEqualTo(StateSnapshot.digest(state));
    assertThat(restored.backendUsed()).isEqualTo(state.backendUsed());
    assertThat(restored.configuration.quotas.alarm()).isEqualTo(state.configuration.quotas.alarm());
    for (String p : List.of(A, B, "")) {
      assertThat(restored.kv.keysOf(p)).isEqualTo(state.kv.keysOf(p));
      assertThat(restored.kv.bytesOf(p)).isEqualTo(state.kv.bytesOf(p));
      assertThat(restored.leases.countOf(p)).isEqualTo(state.leases.countOf(p));
      assertThat(restored.keys.table().usageOf(p).records())
          .isEqualTo(state.keys.table().usageOf(p).records());
      assertThat(restored.keys.table().usageOf(p).bytes())
          .isEqualTo(state.keys.table().usageOf(p).bytes());
      assertThat(restored.sessions.usageOf(p).savedBytes())
          .isEqualTo(state.sessions.usageOf(p).savedBytes());
    }
  }
}
