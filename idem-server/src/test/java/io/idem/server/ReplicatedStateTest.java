package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.idem.core.SessionTableConfig;
import io.idem.proto.Append;
import io.idem.proto.CloseCmd;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CompareAndSet;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import io.idem.proto.EntryResult;
import io.idem.proto.GrantLease;
import io.idem.proto.Increment;
import io.idem.proto.KeepAliveLease;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Result;
import io.idem.proto.RevokeLease;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionBounds;
import io.idem.proto.SessionCmd;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import org.junit.jupiter.api.Test;

/** The deterministic apply function, without Ratis. */
class ReplicatedStateTest {
  private final ReplicatedState state = new ReplicatedState();
  private long index;
  private long time = 1_000;

  /** Every entry applied so far, in order, for replaying on another replica. */
  private final java.util.List<LogEntry> applied = new java.util.ArrayList<>();

  private EntryResult apply(long term, Command... commands) {
    LogEntry.Builder e =
        LogEntry.newBuilder()
            .setFormatVersion(ReplicatedState.LOG_FORMAT_VERSION)
            .setLeaderTimeMs(time);
    for (Command c : commands) {
      e.addCommands(c);
    }
    applied.add(e.build());
    return state.apply(++index, term, e.build(), true);
  }

  private RegisterReply register(String name) {
    Command c =
        Command.newBuilder()
            .setRegister(
                RegisterCmd.newBuilder()
                    .setRequest(
                        RegisterRequest.newBuilder().setName(name).setTtlMs(10_000).setNonce(7))
                    .setSecretHi(1)
                    .setSecretLo(2))
            .build();
    return apply(1, c).getResults(0).getRegistration();
  }

  /** A session command of {@code s} carrying {@code op} as request {@code seq}. */
  static Command op(RegisterReply s, long seq, Operation op) {
    return Command.newBuilder()
        .setSession(
            SessionCmd.newBuilder()
                .setClientId(s.getClientId())
                .setEpoch(s.getEpoch())
                .setSeq(seq)
                .setAck(seq)
                .setOp(op))
        .build();
  }

  private ServerFrame send(RegisterReply s, long seq, Operation op) {
    return apply(1, op(s, seq, op)).getResults(0).getFrame();
  }

  private static Operation grant(String name) {
    return Operation.newBuilder()
        .setGrantLease(GrantLease.newBuilder().setName(name).setTtlMs(5_000))
        .build();
  }

  private static Operation incr(String key) {
    return Operation.newBuilder()
        .setIncrement(Increment.newBuilder().setKey(key).setDelta(1))
        .build();
  }

  @Test
  void retriedGrantLeaseGetsTheOriginalSuccessAndAnotherClientGetsDuplicateLease() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    ServerFrame first = send(a, 1, grant("lock"));
    assertThat(first.getResult().getCode()).isEqualTo(Code.OK);
    ServerFrame retry = send(a, 1, grant("lock"));
    assertThat(retry.getDuplicate()).isTrue();
    assertThat(retry.getResult()).isEqualTo(first.getResult());
    assertThat(send(b, 1, grant("lock")).getResult().getCode()).isEqualTo(Code.DUPLICATE_LEASE);
    assertThat(state.duplicatesSuppressed()).isEqualTo(1);
  }

  private static Operation keepAlive(String name) {
    return Operation.newBuilder()
        .setKeepAliveLease(KeepAliveLease.newBuilder().setName(name))
        .build();
  }

  private static Operation revoke(String name) {
    return Operation.newBuilder().setRevokeLease(RevokeLease.newBuilder().setName(name)).build();
  }

  /**
   * Lease safety: a holder whose lease expired (it was paused, or its keep-alives were late) must
   * not renew, or revoke, the lease the next holder was granted under the same name. Leases had no
   * holder before, so the former holder's late keep-alive renewed the new holder's lease and both
   * believed they held it.
   */
  @Test
  void staleHolderCannotRenewOrRevokeTheNextHoldersLease() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    assertThat(send(a, 1, grant("lock")).getResult().getCode()).isEqualTo(Code.OK);
    time += 5_001; // a's lease (TTL 5 s) runs out
    apply(1);
    ServerFrame granted = send(b, 1, grant("lock"));
    assertThat(granted.getResult().getCode()).isEqualTo(Code.OK);
    assertThat(granted.getResult().getNumber()).isEqualTo(time + 5_000);

    Result late = send(a, 2, keepAlive("lock")).getResult();
    assertThat(late.getCode()).isEqualTo(Code.LEASE_NOT_FOUND);
    assertThat(late.getMessage()).contains("held by another session");
    assertThat(send(a, 3, revoke("lock")).getResult().getCode()).isEqualTo(Code.LEASE_NOT_FOUND);

    time += 1_000;
    assertThat(send(b, 2, keepAlive("lock")).getResult().getNumber()).isEqualTo(time + 5_000);
    time += 500;
    Result revoked = send(b, 3, revoke("lock")).getResult();
    assertThat(revoked.getCode()).isEqualTo(Code.OK);
    assertThat(revoked.getNumber()).as("the log time the lease ended").isEqualTo(time);
    Result gone = send(b, 4, keepAlive("lock")).getResult();
    assertThat(gone.getCode()).isEqualTo(Code.LEASE_NOT_FOUND);
    assertThat(gone.getMessage()).contains("no lease named");
  }

  /** Entries written before leases had holders are applied as they were then, on every replica. */
  @Test
  void versionOneEntriesKeepTheirOwnerlessLeases() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    send(a, 1, grant("lock"));
    LogEntry old =
        LogEntry.newBuilder()
            .setFormatVersion(1)
            .setLeaderTimeMs(time)
            .addCommands(op(b, 1, keepAlive("lock")))
            .addCommands(op(b, 2, revoke("lock")))
            .build();
    EntryResult r = state.apply(++index, 1, old, true);
    assertThat(r.getResults(0).getFrame().getResult().getCode()).isEqualTo(Code.OK);
    Result revoked = r.getResults(1).getFrame().getResult();
    assertThat(revoked.getCode()).isEqualTo(Code.OK);
    assertThat(revoked.getNumber()).as("version 1 answered no log time").isZero();
  }

  @Test
  void registrationsInOneEntryGetDistinctIds() {
    Command r =
        Command.newBuilder()
            .setRegister(
                RegisterCmd.newBuilder().setRequest(RegisterRequest.newBuilder().setTtlMs(10_000)))
            .build();
    EntryResult result = apply(1, r, r, r);
    assertThat(result.getResultsList())
        .extracting(c -> c.getRegistration().getClientId())
        .doesNotHaveDuplicates()
        .containsExactly(4096L, 4097L, 4098L);
  }

  @Test
  void incrementAppendCasAndTypes() {
    RegisterReply a = register("a");
    assertThat(send(a, 1, incr("n")).getResult().getNumber()).isEqualTo(1);
    assertThat(send(a, 2, incr("n")).getResult().getNumber()).isEqualTo(2);
    Operation app =
        Operation.newBuilder()
            .setAppend(Append.newBuilder().setKey("n").setValue(ByteString.copyFromUtf8("x")))
            .build();
    assertThat(send(a, 3, app).getResult().getCode()).isEqualTo(Code.WRONG_TYPE);
    Operation cas =
        Operation.newBuilder()
            .setCompareAndSet(
                CompareAndSet.newBuilder()
                    .setKey("c")
                    .setExpectedVersion(0)
                    .setValue(ByteString.copyFromUtf8("v")))
            .build();
    assertThat(send(a, 4, cas).getResult().getVersion()).isEqualTo(1);
    Operation casAgain = cas.toBuilder().setCompareAndSet(cas.getCompareAndSet()).build();
    assertThat(send(a, 5, casAgain).getResult().getCode()).isEqualTo(Code.CAS_MISMATCH);
    assertThat(state.get("n").getValue().toStringUtf8()).isEqualTo("2");
  }

  @Test
  void leaseKeysVanishOnRevokeAndOnExpiryAndGraceFollowsANewTerm() {
    RegisterReply a = register("a");
    send(a, 1, grant("L"));
    Operation put =
        Operation.newBuilder()
            .setPut(
                Put.newBuilder().setKey("k").setValue(ByteString.copyFromUtf8("v")).setLease("L"))
            .build();
    assertThat(send(a, 2, put).getResult().getCode()).isEqualTo(Code.OK);
    time += 4_000;
    apply(2); // a tick of a new leader: the lease gets its TTL again from now
    time += 4_000;
    apply(2);
    assertThat(state.get("k").getFound()).isTrue();
    time += 1_001;
    apply(2);
    assertThat(state.get("k").getFound()).isFalse();
    send(a, 3, grant("M"));
    send(a, 4, put.toBuilder().setPut(put.getPut().toBuilder().setLease("M")).build());
    Operation revoke =
        Operation.newBuilder().setRevokeLease(RevokeLease.newBuilder().setName("M")).build();
    assertThat(send(a, 5, revoke).getResult().getCode()).isEqualTo(Code.OK);
    assertThat(state.get("k").getFound()).isFalse();
  }

  @Test
  void oversizeValueIsAnInvalidArgumentAnswerAndConsumesTheNumber() {
    RegisterReply a = register("a");
    Operation big =
        Operation.newBuilder()
            .setPut(
                Put.newBuilder()
                    .setKey("k")
                    .setValue(ByteString.copyFrom(new byte[Limits.DEFAULT_MAX_VALUE_BYTES + 1])))
            .build();
    ServerFrame f = send(a, 1, big);
    assertThat(f.getResult().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(f.getResult().getMessage()).contains("limit");
    assertThat(send(a, 2, incr("n")).getResult().getCode()).isEqualTo(Code.OK);
  }

  @Test
  void unknownSessionAndWrongEpochAreRefused() {
    RegisterReply ghost = RegisterReply.newBuilder().setClientId(999).build();
    assertThat(send(ghost, 1, incr("n")).getResult().getCode()).isEqualTo(Code.SESSION_EXPIRED);
    RegisterReply a = register("a");
    assertThat(send(a, 3, incr("n")).getResult().getCode()).isEqualTo(Code.OUT_OF_ORDER);
    assertThat(send(a, 3, incr("n")).getNextSeq()).isEqualTo(1);
  }

  @Test
  void anEntryOfAnUnknownLogFormatIsANoOpThatOnlyMovesThePosition() {
    RegisterReply a = register("a");
    send(a, 1, incr("n"));
    long clock = state.clock();
    LogEntry future =
        LogEntry.newBuilder()
            .setFormatVersion(99)
            .setLeaderTimeMs(clock + 10L * 365 * 24 * 3600 * 1000)
            .addCommands(
                Command.newBuilder()
                    .setClose(
                        CloseCmd.newBuilder().setClientId(a.getClientId()).setEpoch(a.getEpoch())))
            .build();
    assertThat(ReplicatedState.undecodable(future)).contains("log format version 99");
    assertThatThrownBy(() -> state.apply(index + 1, 1, future, true))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("format version 99");
    // A replica that never saw the entry, at the same position: the same state.
    ReplicatedState twin = new ReplicatedState();
    long at = 0;
    for (LogEntry e : applied) {
      twin.apply(++at, 1, e, false);
    }
    assertThat(state.skip(++index, 1).getResultsCount()).isZero();
    twin.skip(index, 1);
    assertThat(state.appliedIndex()).isEqualTo(index);
    assertThat(state.clock()).as("the entry's stamp is not taken").isEqualTo(clock);
    assertThat(StateSnapshot.digest(state)).isEqualTo(StateSnapshot.digest(twin));
    assertThat(send(a, 2, incr("n")).getResult().getCode())
        .as("the session the entry would have closed is open")
        .isEqualTo(Code.OK);
  }

  @Test
  void snapshotRoundTripKeepsTheDigest() throws IOException {
    RegisterReply a = register("a");
    send(a, 1, grant("L"));
    send(
        a,
        2,
        Operation.newBuilder()
            .setPut(
                Put.newBuilder().setKey("k").setValue(ByteString.copyFromUtf8("v")).setLease("L"))
            .build());
    send(
        a,
        3,
        Operation.newBuilder()
            .setAppend(Append.newBuilder().setKey("list").setValue(ByteString.copyFromUtf8("x")))
            .build());
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    StateSnapshot.write(state, out);
    ReplicatedState back = StateSnapshot.read(new ByteArrayInputStream(out.toByteArray()));
    assertThat(StateSnapshot.digest(back)).isEqualTo(StateSnapshot.digest(state));
    assertThat(back.get("k").getLease()).isEqualTo("L");
    assertThat(back.leases.holder("L").getAsLong())
        .as("the holder survives a snapshot")
        .isEqualTo(a.getClientId());
    byte[] bad = out.toByteArray();
    bad[40] ^= 1;
    assertThatThrownBy(() -> StateSnapshot.read(new ByteArrayInputStream(bad)))
        .isInstanceOf(io.idem.core.SnapshotFormatException.class);
  }

  @Test
  void aFollowerThatBuildsNoOutcomesReachesTheSameState() {
    // The leader's copy answers; a follower's copy applies the same entries without outcomes.
    RegisterReply s = register("f");
    Operation put =
        Operation.newBuilder()
            .setPut(Put.newBuilder().setKey("k").setValue(ByteString.copyFromUtf8("v")))
            .build();
    Operation incr =
        Operation.newBuilder().setIncrement(Increment.newBuilder().setKey("n").setDelta(2)).build();
    Command[][] batches = {
      {op(s, 1, put), op(s, 2, incr)},
      {op(s, 2, incr), op(s, 3, incr)}, // a duplicate, then a new one
      {op(s, 5, incr)}, // out of order
      {op(s, 4, grant("l")), op(s, 5, incr)}
    };
    for (Command[] batch : batches) {
      time += 10;
      assertThat(apply(1, batch).getResultsCount()).isEqualTo(batch.length);
    }
    ReplicatedState follower = new ReplicatedState();
    long i = 0;
    for (LogEntry e : applied) {
      assertThat(follower.apply(++i, 1, e, false).getResultsCount()).isZero();
    }
    assertThat(follower.duplicatesSuppressed())
        .isEqualTo(state.duplicatesSuppressed())
        .isEqualTo(1);
    assertThat(StateSnapshot.digest(follower)).isEqualTo(StateSnapshot.digest(state));
  }

  // ---- the replicated configuration ----

  private static Command configure(boolean bootstrap, int maxValueBytes, int window) {
    return Command.newBuilder()
        .setConfigure(
            ConfigureCmd.newBuilder()
                .setBootstrap(bootstrap)
                .setLimits(io.idem.proto.Limits.newBuilder().setMaxValueBytes(maxValueBytes))
                .setSessions(SessionBounds.newBuilder().setWindow(window)))
        .build();
  }

  private ConfigureReply configureEntry(Command... commands) {
    EntryResult r = apply(1, commands);
    return r.getResults(commands.length - 1).getConfigured();
  }

  private static Operation putOf(int bytes) {
    return Operation.newBuilder()
        .setPut(Put.newBuilder().setKey("k").setValue(ByteString.copyFrom(new byte[bytes])))
        .build();
  }

  @Test
  void beforeAnyConfigurationTheCodeDefaultsDecide() {
    assertThat(state.configuration.configured()).isFalse();
    assertThat(state.configuration.current()).isEqualTo(ReplicatedConfig.DEFAULTS);
    RegisterReply a = register("a");
    assertThat(a.getWindow()).isEqualTo(SessionTableConfig.DEFAULT_WINDOW);
    assertThat(a.getLimits().getMaxValueBytes()).isEqualTo(Limits.DEFAULT_MAX_VALUE_BYTES);
    assertThat(a.getLimits().getMaxLeaseTtlMs()).isEqualTo(Limits.DEFAULT_MAX_LEASE_TTL_MS);
  }

  /** Leaders racing at bootstrap each put their flags first in an entry: the first one wins. */
  @Test
  void theFirstBootstrapWinsAndLaterOnesChangeNothing() {
    ConfigureReply first = configureEntry(configure(true, 10, 4));
    assertThat(first.getCode()).isEqualTo(Code.OK);
    assertThat(first.getConfigRevision()).isEqualTo(index);
    long revision = index;
    ConfigureReply second = configureEntry(configure(true, 20, 8), configure(true, 30, 16));
    assertThat(second.getCode()).isEqualTo(Code.OK);
    assertThat(second.getConfigRevision()).isEqualTo(revision);
    assertThat(state.configuration.current().limits().maxValueBytes()).isEqualTo(10);
    assertThat(state.configuration.current().sessions().window()).isEqualTo(4);
    assertThat(state.configuration.current().limits().maxKeyBytes())
        .as("a field left 0 keeps its value")
        .isEqualTo(Limits.DEFAULT_MAX_KEY_BYTES);

    RegisterReply a = register("a");
    assertThat(a.getWindow()).isEqualTo(4);
    assertThat(a.getLimits()).isEqualTo(state.configuration.current().limitsProto());
    assertThat(send(a, 1, putOf(10)).getResult().getCode()).isEqualTo(Code.OK);
    ServerFrame over = send(a, 2, putOf(11));
    assertThat(over.getResult().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(over.getResult().getMessage()).isEqualTo("value is 11 bytes, the limit is 10");
  }

  @Test
  void aChangeThroughTheLogReplacesTheConfigurationInForce() {
    configureEntry(configure(true, 10, 4));
    RegisterReply a = register("a");
    assertThat(send(a, 1, putOf(20)).getResult().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    ConfigureReply changed = configureEntry(configure(false, 20, 0));
    assertThat(changed.getCode()).isEqualTo(Code.OK);
    assertThat(changed.getConfigRevision()).isEqualTo(index);
    assertThat(changed.getLimits().getMaxValueBytes()).isEqualTo(20);
    assertThat(changed.getSessions().getWindow()).isEqualTo(4);
    assertThat(apply(1, opAck(a, 2, 1, putOf(20))).getResults(0).getFrame().getResult().getCode())
        .isEqualTo(Code.OK);
    assertThat(send(a, 1, putOf(20)).getResult().getCode())
        .as("a retry gets its saved answer, not a new decision")
        .isEqualTo(Code.INVALID_ARGUMENT);
  }

  @Test
  void outOfRangeValuesAreRefusedNamedAndChangeNothing() {
    configureEntry(configure(true, 10, 4));
    ReplicatedConfig before = state.configuration.current();
    long revision = state.configuration.revision();
    Object[][] bad = {
      {configure(false, -1, 0), "max_value_bytes must be in [1, 2097152], got -1"},
      {configure(false, Limits.MAX_VALUE_BYTES_LIMIT + 1, 0), "max_value_bytes"},
      {configure(false, 0, SessionTableConfig.MAX_WINDOW + 1), "window must be in [1, 65536]"},
      {
        Command.newBuilder()
            .setConfigure(
                ConfigureCmd.newBuilder()
                    .setSessions(SessionBounds.newBuilder().setWindow(8).setMaxSessions(-5)))
            .build(),
        "max_sessions must be in [1, 2147483647], got -5"
      },
      {
        Command.newBuilder()
            .setConfigure(
                ConfigureCmd.newBuilder()
                    .setLimits(io.idem.proto.Limits.newBuilder().setMaxLeaseTtlMs(1L << 50)))
            .build(),
        "max_lease_ttl_ms"
      },
    };
    for (Object[] b : bad) {
      ConfigureReply r = configureEntry((Command) b[0]);
      assertThat(r.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
      assertThat(r.getMessage()).contains((String) b[1]);
      assertThat(r.getConfigRevision()).isEqualTo(revision);
      assertThat(state.configuration.current()).isEqualTo(before);
    }
  }

  /** Lowering the window drops no saved answer: new requests wait for acknowledgements. */
  @Test
  void aLoweredWindowKeepsSavedAnswersAndRefusesNewRequestsUntilAcknowledged() {
    RegisterReply a = register("a");
    for (long seq = 1; seq <= 4; seq++) {
      apply(1, opAck(a, seq, 1, incr("n")));
    }
    configureEntry(configure(false, 0, 2));
    ServerFrame dup = apply(1, opAck(a, 2, 1, incr("n"))).getResults(0).getFrame();
    assertThat(dup.getDuplicate()).isTrue();
    assertThat(dup.getResult().getNumber()).isEqualTo(2);
    assertThat(apply(1, opAck(a, 5, 1, incr("n"))).getResults(0).getFrame().getResult().getCode())
        .isEqualTo(Code.WINDOW_EXCEEDED);
    assertThat(apply(1, opAck(a, 5, 4, incr("n"))).getResults(0).getFrame().getResult().getNumber())
        .isEqualTo(5);

    ReplicatedState follower = new ReplicatedState();
    long i = 0;
    for (LogEntry e : applied) {
      follower.apply(++i, 1, e, false);
    }
    assertThat(StateSnapshot.digest(follower)).isEqualTo(StateSnapshot.digest(state));
  }

  private static Command opAck(RegisterReply s, long seq, long ack, Operation op) {
    Command c = op(s, seq, op);
    return c.toBuilder().setSession(c.getSession().toBuilder().setAck(ack)).build();
  }

  /** Version 2 nodes skipped a configure command as unknown; replaying such an entry does too. */
  @Test
  void aConfigureCommandInAVersionTwoEntryChangesNothing() {
    LogEntry old =
        LogEntry.newBuilder()
            .setFormatVersion(2)
            .setLeaderTimeMs(time)
            .addCommands(configure(true, 10, 4))
            .build();
    EntryResult r = state.apply(++index, 1, old, true);
    assertThat(r.getResults(0).getConfigured().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(state.configuration.configured()).isFalse();
    assertThat(state.configuration.current()).isEqualTo(ReplicatedConfig.DEFAULTS);
  }

  @Test
  void theSnapshotCarriesTheConfiguration() throws IOException {
    configureEntry(configure(true, 10, 4));
    register("a");
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    StateSnapshot.write(state, out);
    ReplicatedState back = StateSnapshot.read(new ByteArrayInputStream(out.toByteArray()));
    assertThat(back.configuration.current()).isEqualTo(state.configuration.current());
    assertThat(back.configuration.revision())
        .isEqualTo(state.configuration.revision())
        .isEqualTo(1);
    assertThat(StateSnapshot.digest(back)).isEqualTo(StateSnapshot.digest(state));
  }
}
