package io.idem.server;

import com.google.protobuf.ByteString;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.idem.core.SessionSecret;
import io.idem.core.SessionTable;
import io.idem.core.SessionTableConfig;
import io.idem.proto.AuthCmd;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.GetRequest;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Partitions;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.Supplier;

/**
 * The gRPC client port. It authenticates streams before anything reaches the log, hands commands to
 * the {@link Batcher} on the leader, and answers {@code NOT_LEADER} with the leader's client
 * address on a follower. This class holds the RPCs; each session stream's own state and flow
 * control are a {@link SessionStream}'s. The bounds below are the port's, shared by its streams.
 */
final class FrontDoor extends IdemGrpc.IdemImplBase {
  /**
   * After a client half-closes a session stream, how long the front door keeps it open for the
   * answers still owed on it. It ends the stream as soon as the last one is sent; the bound only
   * matters when an entry cannot commit (a leader that lost its quorum), so that such a stream does
   * not stay open forever. The client's unanswered requests then have unknown outcomes, as after
   * any broken stream, and are resent with the same numbers.
   */
  static final long HALF_CLOSE_DRAIN_MS = 5_000;

  /**
   * A batch of answers (ServerFrame.batch) stays near this size: an answer is at most a 64 KiB
   * response plus its fields, so a batch stays well below grpc-java's default 4 MiB inbound limit
   * of a client that did not raise it, whatever the session window.
   */
  static final int MAX_BATCH_BYTES = 1 << 20;

  /**
   * The most requests one request batch may carry: the largest window a cluster may set, so a batch
   * never holds more than a session may have in flight, and one frame cannot fill the batcher's
   * queue for every other session.
   */
  static final int MAX_REQUESTS_PER_BATCH = SessionTableConfig.MAX_WINDOW;

  private final ReplicatedLog log;
  private final Batcher batcher;
  private final IdemStateMachine stateMachine;
  private final Supplier<StatusReply> status;
  private final Membership membership;
  private final boolean unsafeLocalReads;
  private final ServerMetrics metrics;
  private final Outbox.Bounds bounds;
  private final IdentityCheck identity; // null but in a data group of a cluster of several
  private final int groups; // data groups: 1 for a cluster of one group
  private final SecureRandom random = new SecureRandom();

  /**
   * The check of a data group's registration against the metadata group: that the client id names a
   * session there with this secret, usable by this principal, at an epoch at least the one asked
   * for.
   */
  @FunctionalInterface
  interface IdentityCheck {
    /** Completes with null if the identity holds, else with why not. */
    CompletableFuture<String> check(long clientId, long epoch, long hi, long lo, String principal);
  }

  /**
   * A front door of one group of a cluster of {@code groups} data groups.
   *
   * @param identity the metadata group's check of registrations, for a data group of a cluster of
   *     several groups; null otherwise
   */
  FrontDoor(
      ReplicatedLog log,
      Batcher batcher,
      IdemStateMachine stateMachine,
      Supplier<StatusReply> status,
      Membership membership,
      boolean unsafeLocalReads,
      ServerMetrics metrics,
      Outbox.Bounds bounds,
      IdentityCheck identity,
      int groups) {
    this.identity = identity;
    this.groups = groups;
    this.log = log;
    this.batcher = batcher;
    this.stateMachine = stateMachine;
    this.status = status;
    this.membership = membership;
    this.unsafeLocalReads = unsafeLocalReads;
    this.metrics = metrics;
    this.bounds = bounds;
  }

  @Override
  public void register(RegisterRequest req, StreamObserver<RegisterReply> reply) {
    if (!log.isLeader()) {
      answer(
          reply, registerFailure(new ReplicatedLog.NotLeaderException(log.leaderClientAddress())));
      return;
    }
    String principal = ClientPrincipal.current();
    if (principal != null
        && principal.getBytes(StandardCharsets.UTF_8).length > SessionTable.MAX_PRINCIPAL_BYTES) {
      answer(
          reply,
          RegisterReply.newBuilder()
              .setCode(Code.INVALID_ARGUMENT)
              .setMessage(
                  "the client certificate's subject is longer than "
                      + SessionTable.MAX_PRINCIPAL_BYTES
                      + " bytes")
              .build());
      return;
    }
    // The session's secret: the one a resume presents, or the one the client chose for its new
    // session; a client that chose none gets one from here. Only its hash goes into the log (from
    // format 6; format 5 entries, written while the format in force is 5, carried it in clear).
    long hi = req.getSecretHi();
    long lo = req.getSecretLo();
    if (identity != null) {
      // A data group's session is the metadata group's client, under its id and secret: check
      // them there before anything is logged, so that nobody can take an id that is not theirs.
      if (req.getClientId() <= 0) {
        answer(
            reply,
            RegisterReply.newBuilder()
                .setCode(Code.INVALID_ARGUMENT)
                .setMessage(
                    "a data group of a cluster of several groups registers sessions under an id of"
                        + " the metadata group (group 0): register there first")
                .build());
        return;
      }
      identity
          .check(req.getClientId(), req.getEpoch(), hi, lo, principal)
          .whenComplete(
              (why, error) -> {
                if (error != null || why != null) {
                  answer(
                      reply,
                      RegisterReply.newBuilder()
                          .setCode(Code.UNAUTHENTICATED)
                          .setMessage(error != null ? failureMessage(error) : why)
                          .build());
                } else {
                  propose(req, req.getSecretHi(), req.getSecretLo(), principal, reply);
                }
              });
      return;
    }
    if (!req.getResume() && hi == 0 && lo == 0) {
      hi = random.nextLong();
      lo = random.nextLong();
    }
    propose(req, hi, lo, principal, reply);
  }

  /** Logs a registration with secret {@code hi, lo} and answers it. */
  private void propose(
      RegisterRequest req,
      long hi,
      long lo,
      String principal,
      StreamObserver<RegisterReply> reply) {
    RegisterCmd.Builder cmd =
        RegisterCmd.newBuilder().setPrincipal(principal == null ? "" : principal);
    if (stateMachine.writeFormat() >= ReplicatedState.AUTH_SINCE_VERSION) {
      cmd.setRequest(req.toBuilder().clearSecretHi().clearSecretLo())
          .setSecretHash(ByteString.copyFrom(SessionSecret.hash(hi, lo)));
    } else {
      cmd.setRequest(req).setSecretHi(hi).setSecretLo(lo);
    }
    long secretHi = hi;
    long secretLo = lo;
    batcher
        .submit(Command.newBuilder().setRegister(cmd).build())
        .whenComplete(
            (result, error) ->
                answer(
                    reply,
                    error != null
                        ? registerFailure(error)
                        : result.getRegistration().getCode() == Code.OK
                            ? result.getRegistration().toBuilder()
                                .setSecretHi(secretHi)
                                .setSecretLo(secretLo)
                                .build()
                            : result.getRegistration()));
  }

  private RegisterReply registerFailure(Throwable error) {
    return RegisterReply.newBuilder()
        .setCode(failureCode(error))
        .setMessage(failureMessage(error))
        .setLeaderHint(log.leaderClientAddress())
        .build();
  }

  private static <T> void answer(StreamObserver<T> reply, T value) {
    reply.onNext(value);
    reply.onCompleted();
  }

  @Override
  public StreamObserver<ClientFrame> session(StreamObserver<ServerFrame> responses) {
    return new SessionStream(
        log,
        batcher,
        stateMachine,
        metrics,
        bounds,
        (ServerCallStreamObserver<ServerFrame>) responses,
        ClientPrincipal.current());
  }

  @Override
  public void get(GetRequest req, StreamObserver<GetReply> reply) {
    if (!log.isLeader()) {
      answer(reply, getFailure(new ReplicatedLog.NotLeaderException(log.leaderClientAddress())));
      return;
    }
    String misplaced = stateMachine.readRefusal(Partitions.of(req.getKey()));
    if (misplaced != null) {
      answer(reply, GetReply.newBuilder().setCode(Code.WRONG_GROUP).setMessage(misplaced).build());
      return;
    }
    String principal = principal();
    barrier()
        .thenCompose(v -> log.read(req.getKey(), principal))
        .whenComplete((r, error) -> answer(reply, error == null ? r : getFailure(error)));
  }

  @Override
  public void getKey(GetKeyRequest req, StreamObserver<GetKeyReply> reply) {
    if (!log.isLeader()) {
      answer(reply, getKeyFailure(new ReplicatedLog.NotLeaderException(log.leaderClientAddress())));
      return;
    }
    String misplaced = stateMachine.readRefusal(Partitions.ofKey(req.getScope(), req.getKey()));
    if (misplaced != null) {
      answer(
          reply, GetKeyReply.newBuilder().setCode(Code.WRONG_GROUP).setMessage(misplaced).build());
      return;
    }
    String principal = principal();
    barrier()
        .thenCompose(v -> log.readKey(req, principal))
        .whenComplete((r, error) -> answer(reply, error == null ? r : getKeyFailure(error)));
  }

  /**
   * What a read waits for before it asks the log: the batcher's read barrier (an entry appended
   * after the read arrived, committed), unless the node runs with the test-only local reads, whose
   * stale answers the verification's negative control needs.
   */
  private CompletableFuture<Void> barrier() {
    return unsafeLocalReads ? CompletableFuture.completedFuture(null) : batcher.barrier();
  }

  private GetKeyReply getKeyFailure(Throwable error) {
    return GetKeyReply.newBuilder()
        .setCode(failureCode(error))
        .setMessage(failureMessage(error))
        .setLeaderHint(log.leaderClientAddress())
        .build();
  }

  private GetReply getFailure(Throwable error) {
    return GetReply.newBuilder()
        .setCode(failureCode(error))
        .setMessage(failureMessage(error))
        .setLeaderHint(log.leaderClientAddress())
        .build();
  }

  @Override
  public void status(StatusRequest req, StreamObserver<StatusReply> reply) {
    answer(reply, status.get());
  }

  /**
   * A configuration change goes through the log like any command, so every replica applies it at
   * the same position; the state machine validates it there (an out-of-range value is an {@code
   * INVALID_ARGUMENT} answer that changes nothing).
   */
  @Override
  public void configure(ConfigureRequest req, StreamObserver<ConfigureReply> reply) {
    if (!log.isLeader()) {
      answer(
          reply, configureFailure(new ReplicatedLog.NotLeaderException(log.leaderClientAddress())));
      return;
    }
    String principal = principal();
    ConfigureCmd cmd =
        ConfigureCmd.newBuilder()
            .setLimits(req.getLimits())
            .setSessions(req.getSessions())
            .setLogFormat(req.getLogFormat())
            .setQuotas(req.getQuotas())
            .setBackendBytes(req.getBackendBytes())
            .setPrincipal(principal)
            .build();
    CompletableFuture<String> checked;
    if (req.getLogFormat() == 0) {
      checked = CompletableFuture.completedFuture(null);
    } else {
      // Only once every member's code applies the format may leaders write it: a member of older
      // code would apply its entries as no-ops. An admin's request only: the check asks every
      // member for its status.
      String denied = stateMachine.adminDenial(principal, "change the configuration");
      checked =
          denied != null
              ? CompletableFuture.completedFuture(null)
              : membership.formatProblem(req.getLogFormat());
    }
    checked
        .thenCompose(
            problem ->
                problem == null
                    ? batcher.submit(Command.newBuilder().setConfigure(cmd).build())
                    : CompletableFuture.completedFuture(
                        CommandResult.newBuilder()
                            .setConfigured(
                                ConfigureReply.newBuilder()
                                    .setCode(Code.INVALID_ARGUMENT)
                                    .setMessage(problem))
                            .build()))
        .whenComplete(
            (result, error) ->
                answer(reply, error == null ? result.getConfigured() : configureFailure(error)));
  }

  /**
   * Reads or changes access control. A change goes through the log, where the state machine checks
   * that the caller is an admin; a read answers from this node's applied state.
   */
  @Override
  public void auth(AuthRequest req, StreamObserver<AuthReply> reply) {
    if (!log.isLeader()) {
      answer(reply, authFailure(new ReplicatedLog.NotLeaderException(log.leaderClientAddress())));
      return;
    }
    AuthCmd cmd = AuthCmd.newBuilder().setPrincipal(principal()).setRequest(req).build();
    batcher
        .submit(Command.newBuilder().setAuth(cmd).build())
        .whenComplete(
            (result, error) ->
                answer(reply, error == null ? result.getAuth() : authFailure(error)));
  }

  private AuthReply authFailure(Throwable error) {
    return AuthReply.newBuilder()
        .setCode(failureCode(error))
        .setMessage(failureMessage(error))
        .setLeaderHint(log.leaderClientAddress())
        .build();
  }

  /** The current call's principal: its client certificate's subject, or "" without one. */
  private static String principal() {
    String p = ClientPrincipal.current();
    return p == null ? "" : p;
  }

  /**
   * A membership change, through Raft's configuration change (not the Idem log: see {@link
   * Membership}). Answered when it committed, failed or timed out; the leader hint goes with every
   * answer, so that a client that asked a follower, or a leader that was just removed, goes on.
   */
  @Override
  public void changeMembers(ChangeMembersRequest req, StreamObserver<ChangeMembersReply> reply) {
    if (!log.isLeader()) {
      answer(
          reply,
          ChangeMembersReply.newBuilder()
              .setCode(Code.NOT_LEADER)
              .setMessage("not the leader")
              .setLeaderHint(log.leaderClientAddress())
              .addAllMembers(membership.members())
              .build());
      return;
    }
    String denied = stateMachine.adminDenial(principal(), "change the cluster's members");
    if (denied == null && groups > 1 && !req.getOneGroup()) {
      answer(
          reply,
          ChangeMembersReply.newBuilder()
              .setCode(Code.MEMBERSHIP_CHANGE_FAILED)
              .setMessage(
                  "a cluster of several Raft groups changes the members of one group at a time"
                      + " (`idem group move`); this call changes a cluster of one group only")
              .setLeaderHint(log.leaderClientAddress())
              .addAllMembers(membership.members())
              .build());
      return;
    }
    if (denied != null) {
      answer(
          reply,
          ChangeMembersReply.newBuilder()
              .setCode(Code.PERMISSION_DENIED)
              .setMessage(denied)
              .setLeaderHint(log.leaderClientAddress())
              .addAllMembers(membership.members())
              .build());
      return;
    }
    membership
        .change(req)
        .whenComplete(
            (r, error) ->
                answer(
                    reply,
                    (error == null
                            ? r.toBuilder()
                            : ChangeMembersReply.newBuilder()
                                .setCode(Code.MEMBERSHIP_CHANGE_FAILED)
                                .setMessage(failureMessage(error)))
                        .setLeaderHint(log.leaderClientAddress())
                        .build()));
  }

  private ConfigureReply configureFailure(Throwable error) {
    return ConfigureReply.newBuilder()
        .setCode(failureCode(error))
        .setMessage(failureMessage(error))
        .setLeaderHint(log.leaderClientAddress())
        .build();
  }

  static Code failureCode(Throwable error) {
    Throwable e =
        error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    if (e instanceof ReplicatedLog.NotLeaderException) {
      return Code.NOT_LEADER;
    }
    if (e instanceof Batcher.OverloadedException) {
      return Code.OVERLOADED;
    }
    // The outcome of an entry that failed in flight is unknown; the client retries with the same
    // numbers, which is safe. NOT_LEADER tells it to find the (possibly new) leader first.
    return Code.NOT_LEADER;
  }

  static String failureMessage(Throwable error) {
    Throwable e =
        error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
    return e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
  }
}
