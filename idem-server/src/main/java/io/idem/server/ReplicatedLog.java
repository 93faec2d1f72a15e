package io.idem.server;

import io.idem.proto.EntryResult;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.LogEntry;
import java.util.concurrent.CompletableFuture;

/** What the front door and the batcher need of the consensus layer (implemented on Ratis). */
interface ReplicatedLog {

  /**
   * Appends {@code entry} and completes with the state machine's answer once it is applied.
   * Completes exceptionally with {@link NotLeaderException} if this node is not the leader.
   */
  CompletableFuture<EntryResult> append(LogEntry entry);

  /**
   * A read of {@code key} from this node's applied state for {@code principal} (its grants decide
   * while auth is on): linearizable behind the batcher's read barrier, which the caller waits for
   * first.
   */
  CompletableFuture<GetReply> read(String key, String principal);

  /**
   * A read of an idempotency key's record from this node's applied state for {@code principal}; as
   * {@link #read}.
   */
  CompletableFuture<GetKeyReply> readKey(GetKeyRequest request, String principal);

  /** Whether this node currently leads (a hint: leadership may change at any moment). */
  boolean isLeader();

  /**
   * Whether this node leads and has applied every entry committed before its term (Ratis's leader
   * readiness: its first entry of the term is applied), so that its state holds every session the
   * group ever acknowledged. A new leader that was replaying its log, after a restart or a snapshot
   * install, is a leader before it is ready.
   */
  boolean isLeaderReady();

  /** The leader's client address, or an empty string if no leader is known. */
  String leaderClientAddress();

  /** Refused because this node does not lead; carries the leader's client address if known. */
  final class NotLeaderException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final String leaderHint;

    NotLeaderException(String leaderHint) {
      super("not the leader" + (leaderHint.isEmpty() ? "" : "; try " + leaderHint));
      this.leaderHint = leaderHint;
    }

    String leaderHint() {
      return leaderHint;
    }
  }
}
