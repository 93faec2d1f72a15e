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
  private final Outbox.Bounds bounds;
  private final SecureRandom random = new SecureRandom();

  FrontDoor(
      ReplicatedLog log,
      Batcher batcher,
      IdemStateMachine stateMachine,
      Supplier<StatusReply> status,
      Membership membership,
      boolean unsafeLocalReads,
      ServerMetrics metrics,
      Outbox.Bounds bounds) {
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
   *
   * <p>Flow control, both ways ({@link Outbox}): frames are written only while the transport is
   * ready, and wait in the outbox otherwise; the stream reads the next request only while the
   * answers it owes are under its bounds, so that a client that does not read its answers is not
   * read either, and HTTP/2 flow control holds its requests on its side. A stream whose waiting
   * frames do not leave for {@link Outbox.Bounds#stallTimeoutMs} is ended with {@code
   * RESOURCE_EXHAUSTED}; the answers it owed stay saved in the session, and a client that resends
   * gets them.
   *
   * <p>Threads: requests arrive on a gRPC I/O thread, answers on the batcher's replies thread, the
   * transport's readiness on an I/O thread and the stall check on a timer; the stream's lock guards
   * the outbox and every write.
   */
  private final class SessionStream implements StreamObserver<ClientFrame>, AnswerRound.Member {
    private final ServerCallStreamObserver<ServerFrame> out;

    /** The caller's certificate subject, or null: the session must be bound to it or to none. */
    private final String principal;

    /** Answers owed and frames not written yet; guarded by this. */
    private final Outbox outbox = new Outbox(bounds, MAX_BATCH_BYTES);

    private Hello hello;

    /** Written its last frame (or gave up): nothing more goes out. Guarded by this. */
    private boolean done;

    /** Ends once the outbox is empty: nothing new is queued. Guarded by this. */
    private boolean ending;

    /** Whether the client half-closed: the stream ends once nothing is owed (or after a bound). */
    private boolean halfClosed;

    /** A request frame was asked of the transport and has not come yet. Guarded by this. */
    private boolean reading;

    /** A stall check is scheduled. Guarded by this. */
    private boolean stallCheck;

    SessionStream(ServerCallStreamObserver<ServerFrame> out, String principal) {
      this.out = out;
      this.principal = principal;
      // Both must be set before session() returns; from then on this stream asks for each
      // request frame itself (readMore), one at a time, as gRPC's automatic requests would.
      out.disableAutoRequest();
      out.setOnReadyHandler(this::drain);
      reading = true;
      out.request(1); // the Hello
    }

    @Override
    public void onNext(ClientFrame frame) {
      synchronized (this) {
        reading = false;
      }
      try {
        handle(frame);
      } finally {
        readMore();
      }
    }

    private void handle(ClientFrame frame) {
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
            outbox.submitted(n);
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

    /**
     * Asks the transport for the next request frame, if none is asked for and the answers owed
     * leave room; otherwise the next answer to leave asks.
     */
    private synchronized void readMore() {
      if (reading || done || ending || halfClosed) {
        return;
      }
      if (!outbox.mayRead()) {
        return;
      }
      reading = true;
      out.request(1);
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
        outbox.submitted(1);
      }
      whenAnswered(batcher.submit(cmd), seq);
    }

    /** Answers request {@code seq} (0: a keep-alive or close) when its command is done. */
    private void whenAnswered(CompletableFuture<CommandResult> result, long seq) {
      result.whenComplete((CommandResult r, Throwable error) -> answer(r, error, seq));
    }

    private void answer(CommandResult result, Throwable error, long seq) {
      ServerFrame f;
      boolean notLeader = false;
      if (error == null) {
        f = result.getFrame();
      } else {
        Code code = failureCode(error);
        notLeader = code == Code.NOT_LEADER;
        f =
            ServerFrame.newBuilder()
                .setSeq(notLeader ? 0 : seq)
                .setResult(Result.newBuilder().setCode(code).setMessage(failureMessage(error)))
                .setLeaderHint(log.leaderClientAddress())
                .build();
      }
      synchronized (this) {
        if (done || ending) {
          outbox.dropped();
          return;
        }
        // Keeps the answer for the round open on this thread, if any and if the client takes
        // batches; a stream that joined stays in the round, and what it keeps leaves at its end.
        boolean keep =
            !notLeader && hello.getBatches() && (outbox.keeping() || AnswerRound.join(this));
        outbox.answered(f, keep, System.nanoTime());
        if (notLeader || (halfClosed && outbox.inFlight() == 0)) {
          finish();
        } else if (!keep) {
          drain();
        }
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

    @Override
    public synchronized void flush() {
      outbox.seal(System.nanoTime());
      drain();
    }

    /** Queues a frame of the stream's own, after what is kept, and writes what it can. */
    private synchronized void send(ServerFrame f) {
      if (done || ending) {
        return;
      }
      outbox.frame(f, System.nanoTime());
      drain();
    }

    /**
     * Writes waiting frames while the transport is ready (also its on-ready handler); ends an
     * ending stream once none waits; asks for the next request if the answers left room.
     */
    private synchronized void drain() {
      if (done || endedByClient()) {
        return;
      }
      ServerFrame f;
      while ((f = outbox.next()) != null && out.isReady()) {
        outbox.sent(System.nanoTime());
        if (!write(f)) {
          outbox.clear();
          done = true;
          return;
        }
      }
      if (outbox.hasWaiting()) {
        checkStallLater();
      } else if (ending) {
        done = true;
        out.onCompleted();
        return;
      }
      readMore();
    }

    /** Whether the client cancelled the stream; if so, it is over and nothing waits any more. */
    private boolean endedByClient() {
      if (!out.isCancelled()) {
        return false;
      }
      outbox.clear();
      done = true;
      return true;
    }

    /**
     * Writes a frame. The client may cancel between the check and the write, and grpc-java then
     * throws: the stream is over, and the round that flushes it goes on to the other streams.
     */
    private boolean write(ServerFrame f) {
      try {
        out.onNext(f);
        return true;
      } catch (RuntimeException e) {
        LOG.debug(
            "session stream of client {} ended while writing: {}",
            hello == null ? 0 : hello.getClientId(),
            e.toString());
        return false;
      }
    }

    /** Schedules a stall check when the oldest wait reaches the bound, unless one is scheduled. */
    private void checkStallLater() {
      if (stallCheck) {
        return;
      }
      stallCheck = true;
      long left =
          TimeUnit.MILLISECONDS.toNanos(bounds.stallTimeoutMs())
              - outbox.stalledNanos(System.nanoTime());
      CompletableFuture.delayedExecutor(Math.max(0, left), TimeUnit.NANOSECONDS)
          .execute(this::checkStall);
    }

    /** Ends the stream if its frames still wait with none leaving for the bound. */
    private synchronized void checkStall() {
      stallCheck = false;
      if (done || endedByClient()) {
        return;
      }
      if (!outbox.hasWaiting()) {
        return;
      }
      if (!outbox.stalled(System.nanoTime())) {
        checkStallLater(); // frames left meanwhile: the stall started later
        return;
      }
      int owed = outbox.clear();
      done = true;
      metrics.streamCutOff();
      LOG.debug(
          "session stream of client {} cut off: {} answers unread for {} ms",
          hello == null ? 0 : hello.getClientId(),
          owed,
          bounds.stallTimeoutMs());
      out.onError(
          io.grpc.Status.RESOURCE_EXHAUSTED
              .withDescription(
                  "the client read none of the "
                      + owed
                      + " answers waiting on this stream for "
                      + bounds.stallTimeoutMs()
                      + " ms (the server's --stream-stall-timeout-ms); they stay saved in the"
                      + " session: reconnect and resend the unanswered requests with the same"
                      + " numbers")
              .asRuntimeException());
    }

    /** Ends the stream once the frames queued so far are written; nothing new is queued. */
    private synchronized void finish() {
      if (done || ending) {
        return;
      }
      outbox.seal(System.nanoTime());
      ending = true;
      drain();
    }

    @Override
    public void onError(Throwable t) {
      finish();
    }

    /**
     * The client half-closed: it sends nothing more but still waits for the answers owed. The
     * stream ends when the last is written, or after {@link #HALF_CLOSE_DRAIN_MS}.
     */
    @Override
    public synchronized void onCompleted() {
      halfClosed = true;
      if (outbox.inFlight() == 0) {
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
