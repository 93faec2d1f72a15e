package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.proto.LogEntry;
import org.apache.ratis.proto.RaftProtos.LogEntryProto;
import org.apache.ratis.proto.RaftProtos.RaftPeerRole;
import org.apache.ratis.proto.RaftProtos.StateMachineLogEntryProto;
import org.apache.ratis.protocol.ClientId;
import org.apache.ratis.protocol.Message;
import org.apache.ratis.protocol.RaftClientRequest;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.statemachine.TransactionContext;
import org.apache.ratis.thirdparty.com.google.protobuf.ByteString;
import org.junit.jupiter.api.Test;

/**
 * The state machine's two guards against hostile entries: the leader's check of a proposal before
 * it is appended, and the no-op for an entry that cannot be decoded.
 */
class IdemStateMachineTest {
  private final ServerMetrics metrics = new ServerMetrics("n1");
  private final IdemStateMachine machine =
      new IdemStateMachine(ReplicatedConfig.DEFAULTS, 1_000_000, metrics);

  private RaftClientRequest request(ClientId from, long callId) {
    return RaftClientRequest.newBuilder()
        .setClientId(from)
        .setServerId(RaftPeerId.valueOf("n1"))
        .setGroupId(RaftGroupId.randomId())
        .setCallId(callId)
        .setMessage(Message.EMPTY)
        .setType(RaftClientRequest.writeRequestType())
        .build();
  }

  private static LogEntry entry(int version, long stamp) {
    return LogEntry.newBuilder().setFormatVersion(version).setLeaderTimeMs(stamp).build();
  }

  @Test
  void onlyTheFrontDoorsOwnEntriesInTheCurrentFormatAndNotAheadOfTheClockAreProposed() {
    long now = 1_700_000_000_000L;
    machine.expect(1, entry(ReplicatedState.LOG_FORMAT_VERSION, now));
    assertThat(machine.proposalRefusal(request(machine.proposer(), 1), now)).isNull();
    assertThat(machine.proposalRefusal(request(ClientId.randomId(), 1), now))
        .isEqualTo("only this node's front door proposes entries");
    assertThat(machine.proposalRefusal(request(machine.proposer(), 2), now))
        .isEqualTo("not an entry this node's batcher built");

    machine.expect(3, entry(99, now));
    assertThat(machine.proposalRefusal(request(machine.proposer(), 3), now))
        .isEqualTo("it has log format version 99; this node applies versions 1 to 9");

    machine.expect(4, entry(ReplicatedState.LOG_FORMAT_VERSION, now + 5_001));
    assertThat(machine.proposalRefusal(request(machine.proposer(), 4), now))
        .startsWith("stamped 5001 ms ahead of this node's clock");
    machine.expect(5, entry(ReplicatedState.LOG_FORMAT_VERSION, now + 5_000));
    assertThat(machine.proposalRefusal(request(machine.proposer(), 5), now)).isNull();
  }

  private void applyFollowerEntry(long index, ByteString bytes) throws Exception {
    LogEntryProto e =
        LogEntryProto.newBuilder()
            .setIndex(index)
            .setTerm(1)
            .setStateMachineLogEntry(StateMachineLogEntryProto.newBuilder().setLogData(bytes))
            .build();
    TransactionContext trx =
        TransactionContext.newBuilder()
            .setStateMachine(machine)
            .setServerRole(RaftPeerRole.FOLLOWER)
            .setLogEntry(e)
            .build();
    machine.applyTransaction(trx).get();
  }

  @Test
  void entriesThatDoNotDecodeAreAppliedAsCountedNoOps() throws Exception {
    applyFollowerEntry(
        1, ByteString.copyFrom(entry(ReplicatedState.LOG_FORMAT_VERSION, 1_000).toByteArray()));
    String digest = machine.inspect(StateSnapshot::digest);
    long clock = machine.inspect(ReplicatedState::clock);

    applyFollowerEntry(2, ByteString.copyFrom(new byte[] {(byte) 0xff, (byte) 0xff, 0x01}));
    applyFollowerEntry(3, ByteString.copyFrom(entry(99, Long.MAX_VALUE / 2).toByteArray()));

    assertThat(metrics.entriesSkipped()).isEqualTo(2);
    assertThat(machine.inspect(ReplicatedState::appliedIndex)).isEqualTo(3);
    assertThat(machine.inspect(ReplicatedState::clock)).isEqualTo(clock);
    assertThat(machine.getLastAppliedTermIndex().getIndex()).isEqualTo(3);
    // Only the position moved: the same state as a replica that applied nothing at 2 and 3.
    ReplicatedState twin = new ReplicatedState();
    twin.apply(1, 1, entry(ReplicatedState.LOG_FORMAT_VERSION, 1_000), false);
    twin.skip(3, 1);
    assertThat(machine.inspect(StateSnapshot::digest))
        .isNotEqualTo(digest)
        .isEqualTo(StateSnapshot.digest(twin));

    applyFollowerEntry(
        4, ByteString.copyFrom(entry(ReplicatedState.LOG_FORMAT_VERSION, 2_000).toByteArray()));
    assertThat(machine.inspect(ReplicatedState::clock)).isEqualTo(2_000);
  }
}
