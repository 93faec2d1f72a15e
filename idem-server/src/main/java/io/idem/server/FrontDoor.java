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
import io.idem.proto.CloseCmd;
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
import io.idem.proto.Hello;
import io.idem.proto.IdemGrpc;
import io.idem.proto.KeepAliveCmd;
import io.idem.proto.RegisterCmd;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionCmd;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The gRPC client port. It authenticates streams before anything reaches the log, hands commands to
 * the {@link Batcher} on the leader, and answers {@code NOT_LEADER} with the leader's client
 * address on a follower.
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

  private static final Logger LOG = LoggerFactory.getLogger(FrontDoor.class);

  private final ReplicatedLog log;
  private final Batcher batcher;
  private final IdemStateMachine stateMachine;
  private final Supplier<StatusReply> status;
  private final Membership membership;
  private final boolean unsafeLocalReads;
  private final ServerMetrics metrics;
  private final SecureRandom random = new SecureRandom();

  FrontDoor(
      ReplicatedLog log,
      Batcher batcher,
      IdemStateMachine stateMachine,
      Supplier<StatusReply> status,
      Membership membership,
      boolean unsafeLocalReads,
      ServerMetrics metrics) {
    this.log = log;
    this.batcher = batcher;
    this.stateMachine = stateMachine;
    this.status = status;
    this.membership = membership;
    this.unsafeLocalReads = unsafeLocalReads;
    this.metrics = metrics;
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
    if (!req.getResume() && hi == 0 && lo == 0) {
      hi = random.nextLong();
      lo = random.nextLong();
    }
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
        (ServerCallStreamObserver<ServerFrame>) responses, ClientPrincipal.current());
  }

  @Override
  public void get(GetRequest req, StreamObserver<GetReply> reply) {
    if (!log.isLeader()) {
      answer(reply, getFailure(new ReplicatedLog.NotLeaderException(log.leaderClientAddress())));
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

  /**
   * One session's stream: a Hello, then requests (alone or in batches, each handled as if it had
   * come alone) and keep-alives. If the Hello set {@code request_batches}, the stream answers it
   * with a frame that says it takes request batches. If the Hello set {@code batches}, the answers
   * that one {@link AnswerRound} hands out are kept and leave in one frame when it closes; every
   * other frame first sends what is kept, so the stream's order stays the order in which its
   * answers were given.
   */
  private final class SessionStream implements StreamObserver<ClientFrame>, AnswerRound.Member {
    private final ServerCallStreamObserver<ServerFrame> out;

    /** The caller's certificate subject, or null: the session must be bound to it or to none. */
    private final String principal;

    private Hello hello;
    private boolean done;

    /** Commands forwarded on this stream whose answers were not sent yet. */
    private int owed;

    /** Whether the client half-closed: the stream ends once nothing is owed (or after a bound). */
    private boolean halfClosed;

    /** Answers kept during the current round (a client that takes batches); guarded by this. */
    private final List<ServerFrame> kept = new ArrayList<>();

    /** Their serialized size. */
    private int keptBytes;

    SessionStream(ServerCallStreamObserver<ServerFrame> out, String principal) {
      this.out = out;
      this.principal = principal;
    }

    @Override
    public void onNext(ClientFrame frame) {
      switch (frame.getFrameCase()) {
        case HELLO -> onHello(frame.getHello());
        case REQUEST -> {
          if (bound()) {
            request(frame.getRequest());
          }
        }
        case REQUESTS -> {
          if (!bound()) {
            return;
          }
          int n = frame.getRequests().getRequestsCount();
          if (n == 0 || n > MAX_REQUESTS_PER_BATCH) {
            endWith(
                Code.INVALID_ARGUMENT,
                n == 0
                    ? "an empty request batch"
                    : "a request batch of "
                        + n
                        + " requests; at most "
                        + MAX_REQUESTS_PER_BATCH
                        + " (the largest window)");
            return;
          }
          metrics.requestBatch(n);
          List<Command> commands = new ArrayList<>(n);
          for (Request r : frame.getRequests().getRequestsList()) {
            commands.add(sessionCommand(r));
          }
          synchronized (this) {
            owed += n;
          }
          List<CompletableFuture<CommandResult>> results = batcher.submitAll(commands);
          for (int i = 0; i < n; i++) {
            whenAnswered(results.get(i), frame.getRequests().getRequests(i).getSeq());
          }
        }
        case KEEP_ALIVE -> {
          if (!bound()) {
            return;
          }
          KeepAliveCmd cmd =
              KeepAliveCmd.newBuilder()
                  .setClientId(hello.getClientId())
                  .setEpoch(hello.getEpoch())
                  .setAck(frame.getKeepAlive().getAck())
                  .build();
          forward(Command.newBuilder().setKeepAlive(cmd).build(), 0);
        }
        case CLOSE -> {
          if (!bound()) {
            return;
          }
          CloseCmd cmd =
              CloseCmd.newBuilder()
                  .setClientId(hello.getClientId())
                  .setEpoch(hello.getEpoch())
                  .build();
          forward(Command.newBuilder().setClose(cmd).build(), 0);
        }
        default -> endWith(Code.INVALID_ARGUMENT, "empty frame");
      }
    }

    private void request(Request r) {
      forward(sessionCommand(r), r.getSeq());
    }

    private Command sessionCommand(Request r) {
      SessionCmd cmd =
          SessionCmd.newBuilder()
              .setClientId(hello.getClientId())
              .setEpoch(hello.getEpoch())
              .setSeq(r.getSeq())
              .setAck(r.getAck())
              .setOp(r.getOp())
              .build();
      return Command.newBuilder().setSession(cmd).build();
    }

    private void onHello(Hello h) {
      if (hello != null) {
        endWith(Code.INVALID_ARGUMENT, "a stream carries one Hello");
        return;
      }
      if (!log.isLeader()) {
        endWith(Code.NOT_LEADER, "not the leader");
        return;
      }
      switch (stateMachine.authenticate(
          h.getClientId(), h.getSecretHi(), h.getSecretLo(), principal)) {
        case UNKNOWN_SESSION -> {
          // Expired (or never existed): the client must register anew, not give up.
          endWith(
              Code.SESSION_EXPIRED,
              "no session " + h.getClientId() + ": it expired or never existed");
          return;
        }
        case WRONG_SECRET -> {
          endWith(
              Code.UNAUTHENTICATED,
              "wrong secret for session "
                  + h.getClientId()
                  + ", or the session belongs to another client certificate");
          return;
        }
        case OK -> {}
      }
      hello = h;
      if (h.getRequestBatches()) {
        send(
            ServerFrame.newBuilder()
                .setSeq(0)
                .setResult(Result.newBuilder().setCode(Code.OK))
                .setTakesRequestBatches(true)
                .build());
      }
    }

    private boolean bound() {
      if (hello == null) {
        endWith(Code.INVALID_ARGUMENT, "the first frame of a session stream must be a Hello");
        return false;
      }
      return true;
    }

    private void forward(Command cmd, long seq) {
      synchronized (this) {
        owed++;
      }
      whenAnswered(batcher.submit(cmd), seq);
    }

    /** Answers request {@code seq} (0: a keep-alive or close) when its command is done. */
    private void whenAnswered(CompletableFuture<CommandResult> result, long seq) {
      result.whenComplete(
          (CommandResult r, Throwable error) -> {
            try {
              answer(r, error, seq);
            } finally {
              paid();
            }
          });
    }

    private void answer(CommandResult result, Throwable error, long seq) {
      if (error == null) {
        sendAnswer(result.getFrame());
        return;
      }
      Code code = failureCode(error);
      ServerFrame f =
          ServerFrame.newBuilder()
              .setSeq(seq)
              .setResult(Result.newBuilder().setCode(code).setMessage(failureMessage(error)))
              .setLeaderHint(log.leaderClientAddress())
              .build();
      if (code == Code.NOT_LEADER) {
        send(f.toBuilder().setSeq(0).build());
        finish();
      } else {
        send(f);
      }
    }

    /** One owed answer was sent (or could not be); ends a half-closed stream owing nothing. */
    private synchronized void paid() {
      owed--;
      if (halfClosed && owed == 0) {
        finish();
      }
    }

    private void endWith(Code code, String message) {
      send(
          ServerFrame.newBuilder()
              .setSeq(0)
              .setResult(Result.newBuilder().setCode(code).setMessage(message))
              .setLeaderHint(code == Code.NOT_LEADER ? log.leaderClientAddress() : "")
              .build());
      finish();
    }

    /**
     * Keeps an answer for the round open on this thread, if any and if the client takes batches.
     */
    private void sendAnswer(ServerFrame f) {
      synchronized (this) {
        if (hello.getBatches() && !done && (!kept.isEmpty() || AnswerRound.join(this))) {
          int size = f.getSerializedSize();
          if (!kept.isEmpty() && keptBytes + size > MAX_BATCH_BYTES) {
            sendKept(); // this stream is still in the round: what it keeps next leaves at its end
          }
          kept.add(f);
          keptBytes += size;
          return;
        }
      }
      send(f);
    }

    @Override
    public synchronized void flush() {
      sendKept();
    }

    /** Sends the kept answers: one frame, a batch if there are several. Under the lock. */
    private void sendKept() {
      if (kept.isEmpty()) {
        return;
      }
      ServerFrame f =
          kept.size() == 1 ? kept.get(0) : ServerFrame.newBuilder().addAllBatch(kept).build();
      kept.clear();
      keptBytes = 0;
      emit(f);
    }

    private synchronized void send(ServerFrame f) {
      sendKept();
      emit(f);
    }

    /**
     * Writes a frame. The client may cancel between the check and the write, and grpc-java then
     * throws: the stream is over, and the round that flushes it goes on to the other streams.
     */
    private void emit(ServerFrame f) {
      if (done || out.isCancelled()) {
        return;
      }
      try {
        out.onNext(f);
      } catch (RuntimeException e) {
        done = true;
        LOG.debug(
            "session stream of client {} ended while writing: {}",
            hello == null ? 0 : hello.getClientId(),
            e.toString());
      }
    }

    private synchronized void finish() {
      sendKept();
      if (!done) {
        done = true;
        if (!out.isCancelled()) {
          out.onCompleted();
        }
      }
    }

    @Override
    public void onError(Throwable t) {
      finish();
    }

    /**
     * The client half-closed: it sends nothing more but still waits for the answers owed. The
     * stream ends when the last is sent, or after {@link #HALF_CLOSE_DRAIN_MS}.
     */
    @Override
    public synchronized void onCompleted() {
      halfClosed = true;
      if (owed == 0) {
        finish();
        return;
      }
      CompletableFuture.runAsync(
          this::finish,
          CompletableFuture.delayedExecutor(HALF_CLOSE_DRAIN_MS, TimeUnit.MILLISECONDS));
    }
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
