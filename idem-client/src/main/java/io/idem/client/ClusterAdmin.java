package io.idem.client;

import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Member;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * The cluster administration calls of {@link IdemClient}: a server's status, and membership
 * changes. They need no session; they talk to the server the session would use, and follow its
 * leader hints.
 */
final class ClusterAdmin {

  /** Delay between attempts of a membership change that found no leader or no answer. */
  static final long MEMBERSHIP_RETRY_MS = 4 * Reads.RETRY_MS;

  /** What an RPC of a membership change gets beyond the change's own timeout. */
  private static final long MEMBERSHIP_RPC_SLACK_NANOS = TimeUnit.SECONDS.toNanos(5);

  private final AdminRoute session;
  private final long rpcTimeoutMs;
  private final int group; // Groups.NONE: the calls name no group

  /** The calls of a cluster, or of a cluster of several groups as its group 1 answers them. */
  ClusterAdmin(AdminRoute session, long rpcTimeoutMs) {
    this(session, rpcTimeoutMs, Groups.NONE);
  }

  /**
   * The calls of group {@code group} of a cluster of several, on {@code session}'s connections: the
   * status is that group's, and a membership change changes that group only.
   */
  ClusterAdmin(AdminRoute session, long rpcTimeoutMs, int group) {
    this.session = session;
    this.rpcTimeoutMs = rpcTimeoutMs;
    this.group = group;
  }

  /** See {@link IdemClient#status}. */
  ClusterStatus status() {
    StatusReply s;
    try {
      IdemGrpc.IdemBlockingStub stub =
          IdemGrpc.newBlockingStub(session.transport().connection(session.address()).channel)
              .withDeadlineAfter(rpcTimeoutMs, TimeUnit.MILLISECONDS);
      if (group != Groups.NONE) {
        stub = stub.withInterceptors(io.idem.proto.GroupHeader.naming(group));
      }
      s = stub.status(StatusRequest.getDefaultInstance());
    } catch (StatusRuntimeException e) {
      session.redirect("");
      throw new NotSentException(
          NotSentException.Reason.UNAVAILABLE,
          "status: " + e.getStatus().getCode() + " " + e.getStatus().getDescription(),
          0,
          "",
          e);
    } catch (IllegalStateException e) {
      throw new NotSentException(NotSentException.Reason.CLIENT_CLOSED, e.getMessage(), 0, "", e);
    }
    return new ClusterStatus(
        s.getId(),
        s.getRole(),
        s.getLeaderId(),
        s.getLeaderAddress(),
        s.getTerm(),
        s.getAppliedIndex(),
        s.getLogTimeMs(),
        s.getLiveSessions(),
        s.getDuplicatesSuppressed(),
        s.getKeys(),
        s.getLeases(),
        members(s.getMembersList()),
        s.getDigest(),
        s.getDigestIndex(),
        s.getEntriesAppended(),
        s.getCommandsAppended(),
        s.getLogStartIndex(),
        new ClusterConfig(
            s.getLimits().getMaxKeyBytes(),
            s.getLimits().getMaxValueBytes(),
            s.getLimits().getMaxNameChars(),
            s.getLimits().getMaxLeaseTtlMs(),
            s.getSessions().getWindow(),
            s.getSessions().getMaxSessions(),
            s.getSessions().getMaxTtlMs(),
            s.getSessions().getMaxNameChars(),
            s.getConfigRevision(),
            ClusterConfig.quotas(s.getQuotas()),
            s.getBackendBytes()),
        s.getKeyRecords(),
        s.getLogFormat(),
        s.getMaxLogFormat(),
        s.getAuthEnabled(),
        s.getEntriesSkipped(),
        s.getBackendUsedBytes(),
        s.getNoSpaceAlarm());
  }

  /**
   * See {@link IdemClient#changeMembers}: the caller's thread waits for the result of the attempts
   * (which it does not run). Interrupted, it stops them and throws {@link NotSentException} ({@code
   * CLIENT_CLOSED}).
   */
  MembershipChange changeMembers(
      List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    MembershipAttempts attempts = new MembershipAttempts(add, remove, timeout);
    attempts.attempt();
    try {
      return attempts.result.get();
    } catch (ExecutionException e) {
      throw Outcomes.rethrown(e);
    } catch (InterruptedException e) {
      attempts.stopped = true;
      Thread.currentThread().interrupt();
      throw new NotSentException(NotSentException.Reason.CLIENT_CLOSED, "interrupted", 0, "", e);
    }
  }

  /**
   * The attempts of one membership change, each after the last one's answer or failure, the later
   * ones on the transport's timer: no thread waits between them, and the result completes on the
   * transport's workers. The first attempt starts on the caller's thread, the others on the timer,
   * and the answers arrive on gRPC's threads, so the fields are volatile; one attempt is under way
   * at a time.
   */
  private final class MembershipAttempts {
    final List<ClusterStatus.Member> add;
    final List<String> remove;
    final ChangeMembersRequest request;
    final long deadline;
    final CompletableFuture<MembershipChange> result = new CompletableFuture<>();
    volatile boolean answerLost;
    volatile String lastError = "no attempt";
    volatile boolean stopped; // the blocking caller gave up (interrupted)

    MembershipAttempts(List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
      this.add = add;
      this.remove = remove;
      ChangeMembersRequest.Builder req =
          ChangeMembersRequest.newBuilder()
              .addAllRemove(remove)
              .setTimeoutMs(timeout.toMillis())
              .setOneGroup(group != Groups.NONE);
      for (ClusterStatus.Member m : add) {
        req.addAdd(
            Member.newBuilder()
                .setId(m.id())
                .setRaftAddress(m.raftAddress())
                .setClientAddress(m.clientAddress()));
      }
      this.request = req.build();
      // The leader answers within the change's timeout; the RPC gets a little more.
      this.deadline = System.nanoTime() + timeout.toNanos() + MEMBERSHIP_RPC_SLACK_NANOS;
    }

    void attempt() {
      if (stopped) {
        return;
      }
      if (deadline - System.nanoTime() <= 0) {
        fail(timedOut());
        return;
      }
      String address = session.address();
      IdemTransport.Connection c;
      try {
        c = session.transport().connection(address);
      } catch (IllegalStateException e) {
        fail(new NotSentException(NotSentException.Reason.CLIENT_CLOSED, e.getMessage(), 0, "", e));
        return;
      }
      session
          .stub(c.channel)
          .withDeadlineAfter(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)
          .changeMembers(
              request,
              new StreamObserver<>() {
                @Override
                public void onNext(ChangeMembersReply r) {
                  answered(address, r);
                }

                @Override
                public void onError(Throwable t) {
                  answerLost = true;
                  io.grpc.Status s = io.grpc.Status.fromThrowable(t);
                  lastError = address + ": " + s.getCode() + " " + s.getDescription();
                  session.redirect("");
                  retryLater();
                }

                @Override
                public void onCompleted() {}
              });
    }

    private void answered(String address, ChangeMembersReply r) {
      List<ClusterStatus.Member> members = members(r.getMembersList());
      switch (r.getCode()) {
        case OK -> succeed(new MembershipChange(true, "", members));
        case NOT_LEADER -> {
          lastError = address + " is not the leader";
          session.redirect(r.getLeaderHint());
          retryLater();
        }
        case INVALID_ARGUMENT -> {
          if (answerLost && inForce(members, add, remove)) {
            succeed(
                new MembershipChange(
                    true, "an earlier attempt committed (its answer was lost)", members));
          } else {
            fail(new InvalidArgumentException(r.getMessage(), 0, 0));
          }
        }
        default ->
            succeed(new MembershipChange(false, r.getCode() + ": " + r.getMessage(), members));
      }
    }

    /** The next attempt, on the timer: the wait that keeps a leaderless cluster from a storm. */
    private void retryLater() {
      try {
        session
            .transport()
            .timer()
            .schedule(this::attempt, MEMBERSHIP_RETRY_MS, TimeUnit.MILLISECONDS);
      } catch (RejectedExecutionException e) {
        fail(
            new NotSentException(
                NotSentException.Reason.CLIENT_CLOSED, "the client is closed", 0, "", e));
      }
    }

    private IdemException timedOut() {
      if (answerLost) {
        return new OutcomeUnknownException(
            "membership change: no answer in time, an attempt may have committed (read the"
                + " members); last: "
                + lastError,
            0,
            0,
            session.leaderHint());
      }
      return new NotSentException(
          NotSentException.Reason.UNAVAILABLE,
          "membership change: no leader answered in time; last: " + lastError,
          0,
          session.leaderHint(),
          null);
    }

    private void succeed(MembershipChange change) {
      session.onWorkers(() -> result.complete(change));
    }

    private void fail(IdemException e) {
      session.onWorkers(() -> result.completeExceptionally(e));
    }
  }

  private static List<ClusterStatus.Member> members(List<Member> proto) {
    List<ClusterStatus.Member> members = new ArrayList<>();
    proto.forEach(
        m ->
            members.add(
                new ClusterStatus.Member(
                    m.getId(), m.getRaftAddress(), m.getClientAddress(), m.getVoter())));
    return List.copyOf(members);
  }

  /**
   * Whether the change of {@code add} and {@code remove} is already in force in {@code members}.
   */
  private static boolean inForce(
      List<ClusterStatus.Member> members, List<ClusterStatus.Member> add, List<String> remove) {
    for (ClusterStatus.Member a : add) {
      if (members.stream()
          .noneMatch(
              m ->
                  m.voter()
                      && m.id().equals(a.id())
                      && m.raftAddress().equals(a.raftAddress())
                      && m.clientAddress().equals(a.clientAddress()))) {
        return false;
      }
    }
    return members.stream().noneMatch(m -> remove.contains(m.id()));
  }
}
