package io.idem.server;

import static io.idem.server.ReplicatedStateTest.op;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.idem.proto.AcquireKey;
import io.idem.proto.Append;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CompareAndSet;
import io.idem.proto.CompleteKey;
import io.idem.proto.Fence;
import io.idem.proto.Increment;
import io.idem.proto.KeyOutcome;
import io.idem.proto.LogEntry;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ReleaseKey;
import io.idem.proto.RenewKey;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Application idempotency keys as session operations of the replicated state. */
class KeyStateTest {
  private static final long N = ReplicatedState.MAX_COMMANDS_PER_ENTRY;

  private final ReplicatedState state = new ReplicatedState();
  private final List<LogEntry> applied = new ArrayList<>();
  private long index;
  private long time = 1_000;
  private int version = ReplicatedState.LOG_FORMAT_VERSION;

  private EntryResultView apply(Command... commands) {
    LogEntry e =
        LogEntry.newBuilder()
            .setFormatVersion(version)
            .setLeaderTimeMs(time)
            .addAllCommands(List.of(commands))
            .build();
    applied.add(e);
    return new EntryResultView(state.apply(++index, 1, e, true));
  }

  private record EntryResultView(io.idem.proto.EntryResult r) {
    ServerFrame frame(int i) {
      return r.getResults(i).getFrame();
    }
  }

  private RegisterReply register(String name) {
    return apply(
            Command.newBuilder()
                .setRegister(
                    RegisterCmd.newBuilder()
                        .setRequest(
                            RegisterRequest.newBuilder()
                                .setName(name)
                                .setTtlMs(600_000)
                                .setNonce(7))
                        .setSecretHi(1)
                        .setSecretLo(2))
                .build())
        .r()
        .getResults(0)
        .getRegistration();
  }

  private ServerFrame send(RegisterReply s, long seq, Operation op) {
    return apply(op(s, seq, op)).frame(0);
  }

  private static Operation acquire(String key, String fingerprint) {
    return Operation.newBuilder()
        .setAcquireKey(
            AcquireKey.newBuilder()
                .setScope("tenant")
                .setKey(key)
                .setFingerprint(ByteString.copyFromUtf8(fingerprint))
                .setInProgressMs(1_000)
                .setRetentionMs(10_000))
        .build();
  }

  private static Operation complete(String key, long token, String response) {
    return Operation.newBuilder()
        .setCompleteKey(
            CompleteKey.newBuilder()
                .setScope("tenant")
                .setKey(key)
                .setToken(token)
                .setResponse(ByteString.copyFromUtf8(response)))
        .build();
  }

  private static Operation release(String key, long token) {
    return Operation.newBuilder()
        .setReleaseKey(ReleaseKey.newBuilder().setScope("tenant").setKey(key).setToken(token))
        .build();
  }

  private static Operation renew(String key, long token, long extensionMs) {
    return Operation.newBuilder()
        .setRenewKey(
            RenewKey.newBuilder()
                .setScope("tenant")
                .setKey(key)
                .setToken(token)
                .setExtensionMs(extensionMs))
        .build();
  }

  private static Fence fence(String key, long token) {
    return Fence.newBuilder().setScope("tenant").setKey(key).setToken(token).build();
  }

  private static Operation fencedPut(String key, String value, Fence f) {
    return Operation.newBuilder()
        .setPut(Put.newBuilder().setKey(key).setValue(ByteString.copyFromUtf8(value)).setFence(f))
        .build();
  }

  @Test
  void anAcquireTokenIsTheCommandsLogPositionAndARetryGetsTheSavedAnswer() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    // Two commands in one entry: positions 0 and 1.
    EntryResultView e = apply(op(b, 1, acquire("other", "f")), op(a, 1, acquire("order-1", "f")));
    Result first = e.frame(1).getResult();
    assertThat(first.getCode()).isEqualTo(Code.OK);
    assertThat(first.getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);
    assertThat(first.getToken()).isEqualTo(index * N + 1);
    assertThat(e.frame(0).getResult().getToken()).isEqualTo(index * N);
    assertThat(first.getDeadlineMs()).isEqualTo(time + 1_000);
    assertThat(first.getDone()).as("not a takeover").isFalse();

    ServerFrame retry = send(a, 1, acquire("order-1", "f"));
    assertThat(retry.getDuplicate()).isTrue();
    assertThat(retry.getResult()).isEqualTo(first);
    assertThat(state.keys.table().currentToken(id("order-1"))).isEqualTo(first.getToken());

    // Another session's acquire while the owner holds it: in progress, no second owner.
    Result other = send(b, 2, acquire("order-1", "f")).getResult();
    assertThat(other.getKeyOutcome()).isEqualTo(KeyOutcome.IN_PROGRESS);
    assertThat(other.getDeadlineMs()).isEqualTo(first.getDeadlineMs());
    assertThat(state.keys.table().currentToken(id("order-1"))).isEqualTo(first.getToken());
    // Another fingerprint: a mismatch.
    assertThat(send(b, 3, acquire("order-1", "g")).getResult().getKeyOutcome())
        .isEqualTo(KeyOutcome.MISMATCH);
  }

  @Test
  void aTakeoverComesOnlyAfterTheDeadlineInLogTimeWithAGreaterToken() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    time = owner.getDeadlineMs(); // the deadline is inclusive
    assertThat(send(b, 1, acquire("k", "f")).getResult().getKeyOutcome())
        .isEqualTo(KeyOutcome.IN_PROGRESS);
    time++;
    Result taken = send(b, 2, acquire("k", "f")).getResult();
    assertThat(taken.getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);
    assertThat(taken.getDone()).as("a takeover").isTrue();
    assertThat(taken.getToken()).isGreaterThan(owner.getToken()).isEqualTo(index * N);

    // The old owner's settlements are fenced and change nothing.
    String keysBefore = state.keys.digest();
    for (Operation stale :
        List.of(
            complete("k", owner.getToken(), "r"),
            renew("k", owner.getToken(), 5_000),
            release("k", owner.getToken()))) {
      Result r = send(a, nextSeq(), stale).getResult();
      assertThat(r.getCode()).isEqualTo(Code.OK);
      assertThat(r.getKeyOutcome()).isEqualTo(KeyOutcome.KEY_FENCED);
      assertThat(r.getToken()).isEqualTo(taken.getToken());
    }
    assertThat(state.keys.table().currentToken(id("k"))).isEqualTo(taken.getToken());
    assertThat(state.keys.digest()).as("no key record changed").isEqualTo(keysBefore);

    // The new owner renews, then completes; a later acquire replays the response.
    Result renewed = send(b, 3, renew("k", taken.getToken(), 5_000)).getResult();
    assertThat(renewed.getKeyOutcome()).isEqualTo(KeyOutcome.SETTLED);
    assertThat(renewed.getDeadlineMs()).isEqualTo(time + 5_000);
    assertThat(send(b, 4, complete("k", taken.getToken(), "paid")).getResult().getKeyOutcome())
        .isEqualTo(KeyOutcome.SETTLED);
    Result replay = send(a, nextSeq(), acquire("k", "f")).getResult();
    assertThat(replay.getKeyOutcome()).isEqualTo(KeyOutcome.COMPLETED);
    assertThat(replay.getResponse().toStringUtf8()).isEqualTo("paid");
  }

  private long seqA = 1;

  private long nextSeq() {
    return ++seqA;
  }

  @Test
  void aStaleSettlementChangesNoKeyRecord() {
    RegisterReply a = register("a");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    String keysBefore = state.keys.digest();
    for (Operation stale :
        List.of(
            complete("k", owner.getToken() - 1, "r"),
            renew("k", owner.getToken() + 1, 5_000),
            release("k", 7))) {
      Result r = send(a, nextSeq(), stale).getResult();
      assertThat(r.getKeyOutcome()).isEqualTo(KeyOutcome.KEY_FENCED);
      assertThat(r.getToken()).isEqualTo(owner.getToken());
    }
    assertThat(state.keys.digest()).isEqualTo(keysBefore);
    // Release by the owner drops the record: the key is free again.
    assertThat(send(a, nextSeq(), release("k", owner.getToken())).getResult().getKeyOutcome())
        .isEqualTo(KeyOutcome.SETTLED);
    assertThat(state.keys.size()).isZero();
  }

  @Test
  void anInvalidKeyOperationIsInvalidArgumentWithTheTablesReason() {
    RegisterReply a = register("a");
    Operation noRetention =
        Operation.newBuilder()
            .setAcquireKey(AcquireKey.newBuilder().setScope("s").setKey("k").setInProgressMs(1))
            .build();
    Result r = send(a, 1, noRetention).getResult();
    assertThat(r.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(r.getMessage()).contains("retention");
    assertThat(state.keys.pristine()).isTrue();
  }

  @Test
  void aFencedWriteWithAStaleTokenIsRefusedAndWithTheCurrentOneApplied() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    time += 2_000;
    Result taken = send(b, 1, acquire("k", "f")).getResult();
    assertThat(taken.getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);

    Fence stale = fence("k", owner.getToken());
    Fence current = fence("k", taken.getToken());
    List<Operation> staleWrites =
        List.of(
            fencedPut("v", "old", stale),
            Operation.newBuilder()
                .setCompareAndSet(
                    CompareAndSet.newBuilder()
                        .setKey("v")
                        .setValue(ByteString.copyFromUtf8("old"))
                        .setFence(stale))
                .build(),
            Operation.newBuilder()
                .setIncrement(Increment.newBuilder().setKey("n").setDelta(1).setFence(stale))
                .build(),
            Operation.newBuilder()
                .setAppend(
                    Append.newBuilder()
                        .setKey("l")
                        .setValue(ByteString.copyFromUtf8("x"))
                        .setFence(stale))
                .build());
    for (Operation w : staleWrites) {
      Result r = send(a, nextSeq(), w).getResult();
      assertThat(r.getCode()).isEqualTo(Code.FENCED_WRITE);
      assertThat(r.getToken()).isEqualTo(taken.getToken());
    }
    assertThat(state.get("v").getFound()).isFalse();
    assertThat(state.get("n").getFound()).isFalse();
    assertThat(state.get("l").getFound()).isFalse();
    // A retry of a refused write gets the saved refusal.
    ServerFrame again = send(a, seqA, staleWrites.get(3));
    assertThat(again.getDuplicate()).isTrue();
    assertThat(again.getResult().getCode()).isEqualTo(Code.FENCED_WRITE);

    assertThat(send(b, 2, fencedPut("v", "new", current)).getResult().getCode()).isEqualTo(Code.OK);
    assertThat(state.get("v").getValue().toStringUtf8()).isEqualTo("new");
    // A greater token than the current one, or a key without a record, lets the write through.
    assertThat(
            send(b, 3, fencedPut("v", "newer", fence("k", taken.getToken() + 1)))
                .getResult()
                .getCode())
        .isEqualTo(Code.OK);
    assertThat(send(b, 4, fencedPut("w", "x", fence("nokey", 5))).getResult().getCode())
        .isEqualTo(Code.OK);
  }

  @Test
  void keyRecordsExpireByLogTimeWithoutAnyKeyOperation() {
    RegisterReply a = register("a");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    assertThat(send(a, 2, complete("k", owner.getToken(), "r")).getResult().getKeyOutcome())
        .isEqualTo(KeyOutcome.SETTLED);
    time += 10_000; // the retention, inclusive
    apply();
    assertThat(state.keys.size()).isEqualTo(1);
    time++;
    apply();
    assertThat(state.keys.size()).isZero();
  }

  @Test
  void aFollowerReplayingTheEntriesAndASnapshotReachTheSameDigest() throws IOException {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    Result owner = send(a, 1, acquire("k1", "f")).getResult();
    send(b, 1, acquire("k2", "g"));
    send(a, 2, complete("k1", owner.getToken(), "done"));
    send(b, 2, fencedPut("v", "x", fence("k1", owner.getToken())));
    time += 500;
    apply();

    ReplicatedState follower = new ReplicatedState();
    long i = 0;
    for (LogEntry e : applied) {
      follower.apply(++i, 1, e, false);
    }
    String digest = StateSnapshot.digest(state);
    assertThat(StateSnapshot.digest(follower)).isEqualTo(digest);

    ByteArrayOutputStream out = new ByteArrayOutputStream();
    StateSnapshot.write(state, out);
    ReplicatedState restored = StateSnapshot.read(new ByteArrayInputStream(out.toByteArray()));
    assertThat(StateSnapshot.digest(restored)).isEqualTo(digest);
    assertThat(restored.keys.size()).isEqualTo(2);
    assertThat(restored.keys.table().currentToken(id("k1"))).isEqualTo(owner.getToken());
    assertThat(StateSnapshot.digest(state))
        .as("a state with keys")
        .isNotEqualTo(digestWithoutKeys());
  }

  private static String digestWithoutKeys() {
    return StateSnapshot.digest(new ReplicatedState());
  }

  /** In a version 3 entry, a key operation is no operation and a fence is ignored. */
  @Test
  void versionThreeEntriesKnowNoKeysAndNoFences() {
    RegisterReply a = register("a");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    time += 2_000;
    send(a, 2, acquire("k", "f")); // a takeover: the first token is stale now
    version = 3;
    Result r = send(a, 3, acquire("other", "f")).getResult();
    assertThat(r.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(r.getMessage()).isEqualTo("the request carries no operation");
    assertThat(send(a, 4, release("k", owner.getToken())).getResult().getCode())
        .isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(state.keys.size()).isEqualTo(1);
    assertThat(send(a, 5, fencedPut("v", "x", fence("k", owner.getToken()))).getResult().getCode())
        .as("a version 3 node applied the put unfenced")
        .isEqualTo(Code.OK);
    assertThat(state.get("v").getFound()).isTrue();
  }

  @Test
  void thisNodeWritesVersionFourAndStopsAtANewerVersion() {
    assertThat(ReplicatedState.LOG_FORMAT_VERSION).isEqualTo(4);
    LogEntry future =
        LogEntry.newBuilder().setFormatVersion(ReplicatedState.LOG_FORMAT_VERSION + 1).build();
    assertThatThrownBy(() -> state.apply(1, 1, future, false))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("applies versions 1 to 4");
  }

  private static io.idem.core.KeyTable.KeyId id(String key) {
    return new io.idem.core.KeyTable.KeyId("tenant", key);
  }
}
