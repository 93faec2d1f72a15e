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
import io.idem.proto.Delete;
import io.idem.proto.Fence;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
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

    send(a, nextSeq(), Operation.newBuilder().setPut(Put.newBuilder().setKey("d")).build());
    Result staleDelete =
        send(
                a,
                nextSeq(),
                Operation.newBuilder()
                    .setDelete(Delete.newBuilder().setKey("d").setFence(stale))
                    .build())
            .getResult();
    assertThat(staleDelete.getCode()).isEqualTo(Code.FENCED_WRITE);
    assertThat(state.get("d").getFound()).isTrue();

    assertThat(send(b, 2, fencedPut("v", "new", current)).getResult().getCode()).isEqualTo(Code.OK);
    assertThat(state.get("v").getValue().toStringUtf8()).isEqualTo("new");
    // Since format 5 a fence must name the record's exact token: a greater one (never handed out)
    // and a key without a record are refused too.
    Result greater =
        send(b, 3, fencedPut("v", "newer", fence("k", taken.getToken() + 1))).getResult();
    assertThat(greater.getCode()).isEqualTo(Code.FENCED_WRITE);
    assertThat(greater.getMessage()).contains("not the write's fence token");
    Result none = send(b, 4, fencedPut("w", "x", fence("nokey", 5))).getResult();
    assertThat(none.getCode()).isEqualTo(Code.FENCED_WRITE);
    assertThat(none.getToken()).isZero();
    assertThat(state.get("v").getValue().toStringUtf8()).isEqualTo("new");
    assertThat(state.get("w").getFound()).isFalse();
  }

  /**
   * A takeover owner that fails and releases the key must not let the paused first owner's write
   * through: the record is gone, so nothing holds the first owner's token. (Format 4 let it
   * through, which is why format 5 made fences exact.)
   */
  @Test
  void aReleasedKeyRefusesTheFencedWriteOfAnEarlierOwner() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    time += 2_000;
    Result taken = send(b, 1, acquire("k", "f")).getResult();
    assertThat(send(b, 2, release("k", taken.getToken())).getResult().getKeyOutcome())
        .isEqualTo(KeyOutcome.SETTLED);
    Operation late = fencedPut("paid", "twice", fence("k", owner.getToken()));
    assertThat(send(a, 2, late).getResult().getCode()).isEqualTo(Code.FENCED_WRITE);
    assertThat(state.get("paid").getFound()).isFalse();

    version = 4; // what a format 4 entry decides: no record, no refusal
    assertThat(send(a, 3, late).getResult().getCode()).isEqualTo(Code.OK);
    assertThat(state.get("paid").getFound()).isTrue();
  }

  /**
   * Issue 36: from format 8 a token holds its key only until its owner's deadline, as a lease does.
   * A fenced write that reaches the log after the deadline is refused although nobody took the key
   * over (an owner's write resent to a new leader after a long failover); one exactly at the
   * deadline goes through (inclusive, as an acquire holds the key). A format 7 entry, replayed from
   * an older log, lets the late write through as format 7 did. The completion is unchanged: it
   * still settles the key after the deadline while nobody took it over.
   */
  @Test
  void aFencedWriteAfterItsOwnersDeadlineIsRefusedFromFormat8EvenWithoutATakeover() {
    RegisterReply a = register("a");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    Fence f = fence("k", owner.getToken());
    Operation ledgerAppend = fenced(appendOf("ledger", "pay-1"), f);

    time = owner.getDeadlineMs();
    assertThat(send(a, nextSeq(), ledgerAppend).getResult().getCode())
        .as("at the deadline")
        .isEqualTo(Code.OK);
    send(a, nextSeq(), Operation.newBuilder().setPut(Put.newBuilder().setKey("d")).build());

    time++;
    String keysBefore = state.keys.digest();
    List<Operation> lateWrites =
        List.of(
            ledgerAppend,
            fencedPut("v", "late", f),
            fenced(
                Operation.newBuilder()
                    .setCompareAndSet(
                        CompareAndSet.newBuilder()
                            .setKey("v")
                            .setValue(ByteString.copyFromUtf8("late")))
                    .build(),
                f),
            fenced(
                Operation.newBuilder()
                    .setIncrement(Increment.newBuilder().setKey("n").setDelta(1))
                    .build(),
                f),
            fenced(Operation.newBuilder().setDelete(Delete.newBuilder().setKey("d")).build(), f));
    for (Operation w : lateWrites) {
      Result r = send(a, nextSeq(), w).getResult();
      assertThat(r.getCode()).as(w.getOpCase().toString()).isEqualTo(Code.FENCED_WRITE);
      assertThat(r.getToken()).as("the record still holds the token").isEqualTo(owner.getToken());
      assertThat(r.getMessage())
          .contains("deadline, which passed")
          .contains("deadline " + owner.getDeadlineMs() + " ms, log time " + time + " ms");
    }
    assertThat(state.get("ledger").getElementsCount()).isEqualTo(1);
    assertThat(state.get("v").getFound()).isFalse();
    assertThat(state.get("n").getFound()).isFalse();
    assertThat(state.get("d").getFound()).isTrue();
    assertThat(state.keys.digest()).as("a refusal changes no key record").isEqualTo(keysBefore);
    assertThat(state.keys.table().isOwner(id("k"), owner.getToken())).as("no takeover").isTrue();

    version = 7; // an entry of an older log, replayed: judged as format 7 judged it
    assertThat(send(a, nextSeq(), ledgerAppend).getResult().getCode()).isEqualTo(Code.OK);
    assertThat(state.get("ledger").getElementsCount()).isEqualTo(2);

    version = ReplicatedState.LOG_FORMAT_VERSION;
    assertThat(send(a, nextSeq(), complete("k", owner.getToken(), "paid")).getResult())
        .extracting(Result::getKeyOutcome)
        .as("a completion after the deadline without a takeover")
        .isEqualTo(KeyOutcome.SETTLED);
    // The completed record keeps the token and the deadline: a later write under it is refused.
    assertThat(send(a, nextSeq(), ledgerAppend).getResult().getCode()).isEqualTo(Code.FENCED_WRITE);
  }

  /** {@code write} (a put, compare-and-set, increment, append or delete) fenced by {@code f}. */
  private static Operation fenced(Operation write, Fence f) {
    Operation.Builder b = write.toBuilder();
    switch (write.getOpCase()) {
      case PUT -> b.getPutBuilder().setFence(f);
      case COMPARE_AND_SET -> b.getCompareAndSetBuilder().setFence(f);
      case INCREMENT -> b.getIncrementBuilder().setFence(f);
      case APPEND -> b.getAppendBuilder().setFence(f);
      case DELETE -> b.getDeleteBuilder().setFence(f);
      default -> throw new IllegalArgumentException("not a write: " + write.getOpCase());
    }
    return b.build();
  }

  private static Operation completeWith(String key, long token, String response, Operation effect) {
    return complete(key, token, response).toBuilder()
        .setCompleteKey(
            complete(key, token, response).getCompleteKey().toBuilder().setEffect(effect))
        .build();
  }

  private static Operation appendOf(String key, String value) {
    return Operation.newBuilder()
        .setAppend(Append.newBuilder().setKey(key).setValue(ByteString.copyFromUtf8(value)))
        .build();
  }

  @Test
  void aCompletesEffectIsAppliedInTheSameStepOrNotAtAll() {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    time += 2_000;
    Result taken = send(b, 1, acquire("k", "f")).getResult();

    // The stale owner's complete applies neither its effect nor its response.
    String before = state.keys.digest();
    Result stale =
        send(a, 2, completeWith("k", owner.getToken(), "r", appendOf("ledger", "pay-1")))
            .getResult();
    assertThat(stale.getKeyOutcome()).isEqualTo(KeyOutcome.KEY_FENCED);
    assertThat(state.get("ledger").getFound()).isFalse();
    assertThat(state.keys.digest()).isEqualTo(before);

    // A failing effect (a compare-and-set that does not match) leaves the key owned.
    Operation cas =
        Operation.newBuilder()
            .setCompareAndSet(
                CompareAndSet.newBuilder()
                    .setKey("ledger")
                    .setExpectedVersion(3)
                    .setValue(ByteString.copyFromUtf8("x")))
            .build();
    Result mismatch = send(b, 2, completeWith("k", taken.getToken(), "r", cas)).getResult();
    assertThat(mismatch.getCode()).isEqualTo(Code.CAS_MISMATCH);
    assertThat(state.keys.table().isOwner(id("k"), taken.getToken())).isTrue();
    // So does an effect that is not a write.
    Operation notAWrite = acquire("other", "f");
    Result invalid = send(b, 3, completeWith("k", taken.getToken(), "r", notAWrite)).getResult();
    assertThat(invalid.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(state.keys.table().isOwner(id("k"), taken.getToken())).isTrue();

    // The owner's complete applies both: the answer is the write's, settled.
    Result done =
        send(b, 4, completeWith("k", taken.getToken(), "paid", appendOf("ledger", "pay-1")))
            .getResult();
    assertThat(done.getCode()).isEqualTo(Code.OK);
    assertThat(done.getKeyOutcome()).isEqualTo(KeyOutcome.SETTLED);
    assertThat(done.getNumber()).as("the list's new length").isEqualTo(1);
    assertThat(state.get("ledger").getElementsCount()).isEqualTo(1);
    Result replay = send(a, 3, acquire("k", "f")).getResult();
    assertThat(replay.getKeyOutcome()).isEqualTo(KeyOutcome.COMPLETED);
    assertThat(replay.getResponse().toStringUtf8()).isEqualTo("paid");

    // In a format 4 entry the effect is dropped, as a format 4 node would drop the unknown field.
    version = 4;
    Result other = send(a, 4, acquire("k4", "f")).getResult();
    assertThat(
            send(a, 5, completeWith("k4", other.getToken(), "r", appendOf("ledger", "pay-2")))
                .getResult()
                .getKeyOutcome())
        .isEqualTo(KeyOutcome.SETTLED);
    assertThat(state.get("ledger").getElementsCount()).isEqualTo(1);
  }

  @Test
  void aKeyReadShowsTheRecordAsOfTheLogTime() {
    RegisterReply a = register("a");
    GetKeyRequest req = GetKeyRequest.newBuilder().setScope("tenant").setKey("k").build();
    assertThat(state.getKey(req).getFound()).isFalse();
    Result owner = send(a, 1, acquire("k", "f")).getResult();
    GetKeyReply held = state.getKey(req);
    assertThat(held.getFound()).isTrue();
    assertThat(held.getCompleted()).isFalse();
    assertThat(held.getToken()).isEqualTo(owner.getToken());
    assertThat(held.getDeadlineMs()).isEqualTo(owner.getDeadlineMs());
    assertThat(held.getFingerprint().toStringUtf8()).isEqualTo("f");
    send(a, 2, complete("k", owner.getToken(), "paid"));
    GetKeyReply done = state.getKey(req);
    assertThat(done.getCompleted()).isTrue();
    assertThat(done.getResponse().toStringUtf8()).isEqualTo("paid");
    assertThat(done.getCompletedAtMs()).isEqualTo(time);
    assertThat(done.getExpiresAtMs()).isEqualTo(time + 10_000);
    // Past its retention the record reads as absent, before any entry drops it.
    time += 10_001;
    apply();
    assertThat(state.getKey(req).getFound()).isFalse();
    assertThat(state.getKey(GetKeyRequest.newBuilder().setScope("tenant").build()).getCode())
        .isEqualTo(Code.INVALID_ARGUMENT);
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

  /**
   * A snapshot is written off the apply thread from a state frozen on it: what the frozen state
   * writes must be the state of its moment, whatever is applied while the writer runs (a completed
   * key, a takeover, a grown list, a new value, an expired record).
   */
  @Test
  void aFrozenStateWritesTheSnapshotOfItsMomentWhateverIsAppliedAfter() throws IOException {
    RegisterReply a = register("a");
    RegisterReply b = register("b");
    Result owner = send(a, 1, acquire("k1", "f")).getResult();
    send(b, 1, acquire("k2", "g"));
    send(b, 2, appendOf("ledger", "1"));
    send(b, 3, fencedPut("v", "x", fence("k1", owner.getToken())));
    ByteArrayOutputStream then = new ByteArrayOutputStream();
    StateSnapshot.write(state, then);
    String digestThen = StateSnapshot.digest(state);

    StateSnapshot.Frozen frozen = StateSnapshot.freeze(state);
    send(a, 2, completeWith("k1", owner.getToken(), "done", appendOf("ledger", "2")));
    send(b, 4, fencedPut("v", "y", fence("k1", owner.getToken())));
    time += 1_001; // k2's owner's deadline passes: a takeover
    apply();
    send(a, 3, acquire("k2", "g"));
    send(a, 4, acquire("k3", "h"));
    assertThat(StateSnapshot.digest(state)).isNotEqualTo(digestThen);

    ByteArrayOutputStream written = new ByteArrayOutputStream();
    frozen.write(written);
    assertThat(written.toByteArray()).isEqualTo(then.toByteArray());
    ReplicatedState restored = StateSnapshot.read(new ByteArrayInputStream(written.toByteArray()));
    assertThat(StateSnapshot.digest(restored)).isEqualTo(digestThen);
    assertThat(frozen.digest()).isEqualTo(digestThen);
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

  /** In a version 8 entry, a cursor operation is no operation, and no cursor appears. */
  @Test
  void versionEightEntriesKnowNoCursors() {
    RegisterReply a = register("a");
    version = 8;
    Operation claim =
        Operation.newBuilder()
            .setClaimCursor(io.idem.proto.ClaimCursor.newBuilder().setKey("cur"))
            .build();
    Result r = send(a, 1, claim).getResult();
    assertThat(r.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
    assertThat(r.getMessage()).isEqualTo("the request carries no operation");
    assertThat(state.get("cur").getFound()).isFalse();
    version = 9;
    Result claimed = send(a, 2, claim).getResult();
    assertThat(claimed.getCode()).isEqualTo(Code.OK);
    assertThat(claimed.getToken()).isEqualTo(1);
    assertThat(claimed.getPosition()).isEqualTo(-1);
    assertThat(state.get("cur").getValue().toStringUtf8())
        .isEqualTo("idem-cursor epoch=1 position=-1");
  }

  @Test
  void thisNodeWritesVersionNineAndDoesNotApplyANewerVersion() {
    assertThat(ReplicatedState.LOG_FORMAT_VERSION).isEqualTo(9);
    LogEntry future =
        LogEntry.newBuilder().setFormatVersion(ReplicatedState.LOG_FORMAT_VERSION + 1).build();
    assertThat(ReplicatedState.undecodable(future)).contains("applies versions 1 to 9");
    assertThatThrownBy(() -> state.apply(1, 1, future, false))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("applies versions 1 to 9");
  }

  @Test
  void aNewKeyBeyondTheCapacityIsTooManyKeysAndChangesNothing() {
    KeyState ks = new KeyState();
    io.idem.core.KeyTable.Capacity one = new io.idem.core.KeyTable.Capacity(1, Long.MAX_VALUE);
    AcquireKey first = acquire("k1", "f").getAcquireKey();
    AcquireKey second = acquire("k2", "f").getAcquireKey();
    assertThat(ks.acquire(1, first, 10, 1_000, one).getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);
    String before = ks.digest();
    Result full = ks.acquire(2, second, 20, 1_000, one);
    assertThat(full.getCode()).isEqualTo(Code.TOO_MANY_KEYS);
    assertThat(full.getMessage()).contains("the key table is full (1 records");
    assertThat(ks.digest()).isEqualTo(before);
    assertThat(KeyState.CAPACITY.maxRecords()).isEqualTo(1_000_000);
    assertThat(KeyState.CAPACITY.maxBytes()).isEqualTo(512L << 20);
  }

  private static io.idem.core.KeyTable.KeyId id(String key) {
    return new io.idem.core.KeyTable.KeyId("tenant", key);
  }
}
