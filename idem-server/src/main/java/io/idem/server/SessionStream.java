package io.idem.server;

import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.idem.proto.ClientFrame;
import io.idem.proto.CloseCmd;
import io.idem.proto.Code;
import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.Hello;
import io.idem.proto.KeepAliveCmd;
import io.idem.proto.Request;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionCmd;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One session's stream: a Hello, then requests (alone or in batches, each handled as if it had come
 * alone) and keep-alives. If the Hello set {@code request_batches}, the stream answers it with a
 * frame that says it takes request batches. If the Hello set {@code batches}, the answers that one
 * {@link AnswerRound} hands out are kept and leave in one frame when it closes; every other frame
 * first sends what is kept, so the stream's order stays the order in which its answers were given.
 *
 * <p>Flow control, both ways ({@link Outbox}): frames are written only while the transport is
 * ready, and wait in the outbox otherwise; the stream reads the next request only while the answers
 * it owes are under its bounds, so that a client that does not read its answers is not read either,
 * and HTTP/2 flow control holds its requests on its side. A stream whose waiting frames do not
 * leave for {@link Outbox.Bounds#stallTimeoutMs} is ended with {@code RESOURCE_EXHAUSTED}; the
 * answers it owed stay saved in the session, and a client that resends gets them.
 *
 * <p>Threads: requests arrive on a gRPC I/O thread, answers on the batcher's replies thread, the
 * transport's readiness on an I/O thread and the stall check on a timer; the stream's lock guards
 * the outbox and every write.
 */
final class SessionStream implements StreamObserver<ClientFrame>, AnswerRound.Member {
  // The front door's logger: its stream lines keep the name operators filter them by.
  private static final Logger LOG = LoggerFactory.getLogger(FrontDoor.class);

  private final ReplicatedLog log;
  private final Batcher batcher;
  private final IdemStateMachine stateMachine;
  private final ServerMetrics metrics;
  private final Outbox.Bounds bounds;
  private final ServerCallStreamObserver<ServerFrame> out;

  /** The caller's certificate subject, or null: the session must be bound to it or to none. */
  private final String principal;

  /** Answers owed and frames not written yet; guarded by this. */
  private final Outbox outbox;

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

  SessionStream(
      ReplicatedLog log,
      Batcher batcher,
      IdemStateMachine stateMachine,
      ServerMetrics metrics,
      Outbox.Bounds bounds,
      ServerCallStreamObserver<ServerFrame> out,
      String principal) {
    this.log = log;
    this.batcher = batcher;
    this.stateMachine = stateMachine;
    this.metrics = metrics;
    this.bounds = bounds;
    this.outbox = new Outbox(bounds, FrontDoor.MAX_BATCH_BYTES);
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
        if (n == 0 || n > FrontDoor.MAX_REQUESTS_PER_BATCH) {
          endWith(
              Code.INVALID_ARGUMENT,
              n == 0
                  ? "an empty request batch"
                  : "a request batch of "
                      + n
                      + " requests; at most "
                      + FrontDoor.MAX_REQUESTS_PER_BATCH
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
   * Asks the transport for the next request frame, if none is asked for and the answers owed leave
   * room; otherwise the next answer to leave asks.
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
        if (!log.isLeaderReady()) {
          // A new leader still applying its log may not know a live session yet: "expired" would
          // make the client drop it and its calls' outcomes. It retries here shortly.
          endWith(
              Code.NOT_LEADER,
              "the leader is still applying its log and does not know session "
                  + h.getClientId()
                  + " yet: retry");
          return;
        }
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
      Code code = FrontDoor.failureCode(error);
      notLeader = code == Code.NOT_LEADER;
      f =
          ServerFrame.newBuilder()
              .setSeq(notLeader ? 0 : seq)
              .setResult(
                  Result.newBuilder().setCode(code).setMessage(FrontDoor.failureMessage(error)))
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
   * Writes waiting frames while the transport is ready (also its on-ready handler); ends an ending
   * stream once none waits; asks for the next request if the answers left room.
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
   * The client half-closed: it sends nothing more but still waits for the answers owed. The stream
   * ends when the last is written, or after {@link FrontDoor#HALF_CLOSE_DRAIN_MS}.
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
        CompletableFuture.delayedExecutor(FrontDoor.HALF_CLOSE_DRAIN_MS, TimeUnit.MILLISECONDS));
  }
}
