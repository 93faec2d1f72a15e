package io.idem.client;

import io.idem.proto.Code;
import io.idem.proto.Operation;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import org.jspecify.annotations.Nullable;

/**
 * How the server's answers become the API's results and exceptions: the typed result of each
 * operation, the {@link RejectedException} each refusal code stands for, and the unwrapping of a
 * blocking call's failure.
 */
final class Outcomes {

  private Outcomes() {}

  /**
   * The typed result of {@code op}'s answer {@code f}, or (thrown) the exception it stands for.
   *
   * @param clientId the session's id, for the exception's context
   */
  static OperationResult typed(Operation op, ServerFrame f, long clientId) {
    Result r = f.getResult();
    long rev = r.getRevision();
    boolean dup = f.getDuplicate();
    if (op.hasCommitCursor() && (r.getCode() == Code.CURSOR_FENCED || r.getPosition() != 0)) {
      return cursorCommit(r, clientId, f.getSeq(), dup);
    }
    if (r.getCode() != Code.OK && !(r.getCode() == Code.CAS_MISMATCH && op.hasCompareAndSet())) {
      throw rejected(r, clientId, f.getSeq());
    }
    return switch (op.getOpCase()) {
      case PUT -> new WriteResult(rev, r.getVersion(), dup);
      case DELETE -> new DeleteResult(r.getDone(), rev, dup);
      case COMPARE_AND_SET -> new CasResult(r.getCode() == Code.OK, r.getVersion(), rev, dup);
      case INCREMENT -> new CounterResult(r.getNumber(), rev, dup);
      case APPEND -> new AppendResult(r.getNumber(), rev, dup);
      case GRANT_LEASE, KEEP_ALIVE_LEASE, REVOKE_LEASE -> new LeaseResult(r.getNumber(), rev, dup);
      case ACQUIRE_KEY ->
          switch (r.getKeyOutcome()) {
            case ACQUIRED ->
                new KeyAcquisition.Acquired(r.getToken(), r.getDeadlineMs(), r.getDone(), rev, dup);
            case COMPLETED -> new KeyAcquisition.Completed(r.getResponse().toByteArray(), rev, dup);
            case IN_PROGRESS -> new KeyAcquisition.InProgress(r.getDeadlineMs(), rev, dup);
            case MISMATCH -> new KeyAcquisition.Mismatch(rev, dup);
            default -> throw unexpectedOutcome(r, clientId, f.getSeq());
          };
      case COMPLETE_KEY, RELEASE_KEY, RENEW_KEY ->
          switch (r.getKeyOutcome()) {
            case SETTLED -> new KeySettlement.Settled(r.getDeadlineMs(), r.getNumber(), rev, dup);
            case KEY_FENCED -> new KeySettlement.Fenced(r.getToken(), rev, dup);
            default -> throw unexpectedOutcome(r, clientId, f.getSeq());
          };
      case CLAIM_CURSOR -> new CursorClaim(r.getToken(), r.getPosition(), rev, dup);
      case COMMIT_CURSOR -> cursorCommit(r, clientId, f.getSeq(), dup);
      case OP_NOT_SET -> throw new ProtocolException("an answer to no operation", 0, f.getSeq());
    };
  }

  /**
   * A cursor commit's answer. An answer past the epoch check carries the cursor's position (-1 or
   * above 0); one without (0) refused the command whole, and is thrown by the caller.
   */
  private static CursorCommit cursorCommit(Result r, long clientId, long seq, boolean dup) {
    long rev = r.getRevision();
    if (r.getCode() == Code.CURSOR_FENCED) {
      return new CursorCommit.Fenced(r.getToken(), r.getPosition(), rev, dup);
    }
    if (r.getCode() != Code.OK) {
      return new CursorCommit.Stopped(
          r.getPosition(), r.getStepsDone(), rejected(r, clientId, seq), 0, rev, dup);
    }
    if (r.getKeyOutcome() == io.idem.proto.KeyOutcome.KEY_FENCED) {
      return new CursorCommit.Stopped(
          r.getPosition(), r.getStepsDone(), null, r.getToken(), rev, dup);
    }
    return new CursorCommit.Committed(r.getPosition(), rev, dup);
  }

  private static ProtocolException unexpectedOutcome(Result r, long clientId, long seq) {
    return new ProtocolException("a key operation answered " + r.getKeyOutcome(), clientId, seq);
  }

  private static RejectedException rejected(Result r, long id, long seq) {
    String m = r.getMessage();
    return switch (r.getCode()) {
      case DUPLICATE_LEASE -> new DuplicateLeaseException(m, id, seq);
      case LEASE_NOT_FOUND -> new LeaseNotFoundException(m, id, seq);
      case WRONG_TYPE -> new WrongTypeException(m, id, seq);
      case INVALID_ARGUMENT, WRONG_GROUP -> new InvalidArgumentException(m, id, seq);
      case FENCED_WRITE -> new FencedWriteException(m, r.getToken(), id, seq);
      case CAS_MISMATCH -> new CasMismatchException(m, id, seq);
      case TOO_MANY_KEYS -> new TooManyKeysException(m, id, seq);
      case PERMISSION_DENIED -> new PermissionDeniedException(m, id, seq);
      case QUOTA_EXCEEDED -> new QuotaExceededException(m, id, seq);
      case NO_SPACE -> new NoSpaceException(m, id, seq);
      default -> new ProtocolException(r.getCode() + ": " + m, id, seq);
    };
  }

  /**
   * Waits for {@code f}: its value, or its failure rethrown as it is (an {@link IdemException}).
   * Interrupted, it throws {@link OutcomeUnknownException} and leaves the call going on.
   */
  static <T> T join(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      throw rethrown(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new OutcomeUnknownException(
          "interrupted while waiting for the answer; the call goes on", 0, 0, "");
    }
  }

  /** The failure of a blocking call whose future failed with {@code e}, to throw. */
  static RuntimeException rethrown(ExecutionException e) {
    Throwable t = unwrap(e.getCause());
    return t instanceof RuntimeException r ? r : unexpected(t);
  }

  static @Nullable Throwable unwrap(@Nullable Throwable t) {
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  static IdemException unexpected(@Nullable Throwable t) {
    return new ProtocolException("unexpected failure: " + t, 0, 0);
  }
}
