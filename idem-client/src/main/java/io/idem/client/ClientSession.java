package io.idem.client;

import io.grpc.ManagedChannel;
import io.grpc.stub.StreamObserver;
import io.idem.proto.ClientFrame;
import io.idem.proto.CloseSession;
import io.idem.proto.Code;
import io.idem.proto.Hello;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionKeepAlive;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The session engine behind {@link IdemClient}: registers, numbers requests, keeps up to a window
 * of them in flight on one gRPC stream, and on {@code NOT_LEADER}, a lost connection or a stall
 * reconnects (to the leader hint or the next server) and resends everything outstanding, in order,
 * with the same numbers. All state is guarded by {@code this}; the transport's timer thread runs
 * timers.
 */
final class ClientSession implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ClientSession.class);
  private static final long TICK_MS = 50;
  private static final long MAX_BACKOFF_MS = 1_000;

  /** One call from the application. */
  static final class Call {
    final Operation op;
    final CompletableFuture<ServerFrame> future = new CompletableFuture<>();
    final long deadlineNanos;
    long seq;
    long sentNanos;

    Call(Operation op, long deadlineNanos) {
      this.op = op;
      this.deadlineNanos = deadlineNanos;
    }
  }

  private final IdemClient.Settings settings;
  private final IdentityJournal journal;
  private final SecureRandom random = new SecureRandom();
  private final IdemTransport transport;
  private final boolean ownsTransport;
  private final ScheduledExecutorService timer;
  private final ScheduledFuture<?> ticking;
  private final ArrayDeque<Call> waiting = new ArrayDeque<>();
  private final TreeMap<Long, Call> outstanding = new TreeMap<>();
  private final List<Call> recovered = new ArrayList<>();

  // Session.
  private boolean registered;
  private boolean registering;
  private long clientId;
  private long epoch;
  private long secretHi;
  private long secretLo;
  private long nextSeq = 1;
  private long registrationNonce;
  private int window;

  // Connection.
  private int serverIndex;
  private String leaderHint = "";
  private StreamObserver<ClientFrame> stream;
  private int generation;
  private long backoffMs = 50;
  private long lastKeepAliveNanos;
  private long lastFrameNanos;
  private long lastResendFrom = -1;
  private long lastResendNanos;

  // Counters.
  private long retries;
  private long duplicates;
  private boolean closed;
  private IdemException fatal;

  /**
   * A session over {@code transport}, or over a transport of its own (closed with it) when {@code
   * transport} is null.
   */
  ClientSession(IdemClient.Settings settings, IdemTransport transport) {
    this.settings = settings;
    this.ownsTransport = transport == null;
    this.transport = ownsTransport ? IdemTransport.create() : transport;
    this.timer = this.transport.timer();
    try {
      this.journal =
          settings.identityFile() == null ? null : IdentityJournal.open(settings.identityFile());
    } catch (java.io.IOException e) {
      if (ownsTransport) {
        this.transport.close();
      }
      throw new IdemException(
          "cannot open identity file " + settings.identityFile() + ": " + e.getMessage(), e);
    }
    if (journal != null) {
      recoverFromJournal();
    }
    this.ticking =
        timer.scheduleWithFixedDelay(this::tick, TICK_MS, TICK_MS, TimeUnit.MILLISECONDS);
    if (!recovered.isEmpty()) {
      // Resume at once: what a previous instance had in flight must not wait for a new call (a
      // caller waiting on the recovered calls before sending more would wait forever).
      synchronized (this) {
        startRegistration();
      }
    }
  }

  /** Requests a previous instance had in flight, to be resent with their numbers. */
  private void recoverFromJournal() {
    for (Map.Entry<Long, Operation> e : journal.outstanding().entrySet()) {
      Call c = new Call(e.getValue(), Long.MAX_VALUE);
      c.seq = e.getKey();
      outstanding.put(c.seq, c);
      recovered.add(c);
      nextSeq = Math.max(nextSeq, c.seq + 1);
    }
  }

  synchronized List<Call> recovered() {
    return List.copyOf(recovered);
  }

  /** Queues an operation; the future completes with the server's frame for it. */
  CompletableFuture<ServerFrame> submit(Operation op, long timeoutMs) {
    Call c = new Call(op, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs));
    synchronized (this) {
      if (closed) {
        c.future.completeExceptionally(
            fatal != null ? fatal : new IdemException("the client is closed"));
        return c.future;
      }
      waiting.add(c);
      if (!registered) {
        startRegistration();
      } else {
        pump();
      }
    }
    return c.future;
  }

  // ---- registration ----

  private void startRegistration() {
    if (registering || closed) {
      return;
    }
    registering = true;
    RegisterRequest.Builder req = RegisterRequest.newBuilder().setTtlMs(settings.sessionTtlMs());
    IdentityJournal.Identity id = journal == null ? null : journal.identity();
    if (id != null) {
      req.setName(id.name()).setResume(true).setSecretHi(id.secretHi()).setSecretLo(id.secretLo());
      registrationNonce = registrationNonce == 0 ? random.nextLong() : registrationNonce;
    } else {
      if (journal != null && journal.pending() != null) {
        // A registration that a previous instance sent without learning its answer: resend it with
        // its nonce, so that a success it had is returned rather than a second session opened.
        registrationNonce = journal.pending().nonce();
      } else if (registrationNonce == 0) {
        registrationNonce = random.nextLong();
        if (journal != null) {
          journal.pendingRegistration(settings.name(), registrationNonce, settings.sessionTtlMs());
        }
      }
      if (settings.name() != null) {
        req.setName(settings.name());
      }
    }
    req.setNonce(registrationNonce);
    sendRegistration(req.build());
  }

  private void sendRegistration(RegisterRequest req) {
    String address = currentAddress();
    ManagedChannel channel = channelOrFail(address);
    if (channel == null) {
      return;
    }
    IdemGrpc.newStub(channel)
        .withDeadlineAfter(settings.rpcTimeoutMs(), TimeUnit.MILLISECONDS)
        .register(
            req,
            new StreamObserver<>() {
              @Override
              public void onNext(RegisterReply reply) {
                onRegistration(req, reply);
              }

              @Override
              public void onError(Throwable t) {
                LOG.debug("register via {} failed: {}", address, t.toString());
                retryRegistration(req, "");
              }

              @Override
              public void onCompleted() {}
            });
  }

  private synchronized void retryRegistration(RegisterRequest req, String hint) {
    if (closed || !registering || req.getNonce() != registrationNonce) {
      return;
    }
    moveTo(hint);
    retries++;
    long delay = nextBackoff();
    later(
        delay,
        () -> {
          if (!closed) {
            sendRegistration(req);
          }
        });
  }

  /** Runs {@code action} under the session's lock after {@code delayMs}. */
  private void later(long delayMs, Runnable action) {
    try {
      timer.schedule(
          () -> {
            synchronized (ClientSession.this) {
              action.run();
            }
          },
          delayMs,
          TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      fail(new IdemException("the client's transport is closed"));
    }
  }

  private synchronized void onRegistration(RegisterRequest req, RegisterReply reply) {
    // A late reply of an attempt already settled (an RPC that timed out here but succeeded there)
    // must not register twice.
    if (closed || !registering || req.getNonce() != registrationNonce) {
      return;
    }
    switch (reply.getCode()) {
      case OK -> {
        registering = false;
        registered = true;
        registrationNonce = 0;
        clientId = reply.getClientId();
        epoch = reply.getEpoch();
        secretHi = reply.getSecretHi();
        secretLo = reply.getSecretLo();
        window =
            reply.getWindow() > 0
                ? Math.min(settings.window(), reply.getWindow())
                : settings.window();
        if (!req.getResume()) {
          nextSeq = reply.getNextSeq();
          if (journal != null) {
            journal.identity(
                new IdentityJournal.Identity(
                    settings.name(), clientId, secretHi, secretLo, settings.sessionTtlMs()));
          }
        } else {
          nextSeq = Math.max(nextSeq, reply.getNextSeq());
        }
        backoffMs = 50;
        LOG.debug("session {} epoch {} next {}", clientId, epoch, nextSeq);
        openStream();
      }
      case NOT_LEADER, TOO_MANY_SESSIONS, OVERLOADED, NAME_IN_USE ->
          retryRegistration(req, reply.getLeaderHint());
      case SESSION_EXPIRED -> {
        // Nothing to resume: the old session expired. What it had in flight is unknowable.
        registering = false;
        failOutstanding(
            "the session expired while the client was away; these calls were applied at most once");
        if (journal != null) {
          journal.forget();
        }
        registrationNonce = 0;
        nextSeq = 1;
        startRegistration();
      }
      default ->
          fail(
              reply.getCode() == Code.UNAUTHENTICATED
                  ? new FencedException(
                      "the server refused this client's secret: " + reply.getMessage())
                  : new InvalidArgumentException(
                      "registration refused (" + reply.getCode() + "): " + reply.getMessage()));
    }
  }

  // ---- the stream ----

  private void openStream() {
    int gen = ++generation;
    String address = currentAddress();
    ManagedChannel channel = channelOrFail(address);
    if (channel == null) {
      return;
    }
    StreamObserver<ClientFrame> s =
        IdemGrpc.newStub(channel)
            .session(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ServerFrame f) {
                    onFrame(gen, f);
                  }

                  @Override
                  public void onError(Throwable t) {
                    LOG.debug("stream to {} failed: {}", address, t.toString());
                    onStreamEnd(gen, "");
                  }

                  @Override
                  public void onCompleted() {
                    onStreamEnd(gen, "");
                  }
                });
    stream = s;
    lastFrameNanos = System.nanoTime();
    s.onNext(
        ClientFrame.newBuilder()
            .setHello(
                Hello.newBuilder()
                    .setClientId(clientId)
                    .setEpoch(epoch)
                    .setSecretHi(secretHi)
                    .setSecretLo(secretLo))
            .build());
    resendOutstanding(Long.MIN_VALUE);
    pump();
  }

  private synchronized void onStreamEnd(int gen, String hint) {
    if (gen != generation || closed) {
      return;
    }
    stream = null;
    reconnectLater(hint);
  }

  private void reconnectLater(String hint) {
    stream = null;
    generation++;
    moveTo(hint);
    retries++;
    long delay = nextBackoff();
    int gen = generation;
    later(
        delay,
        () -> {
          if (!closed && gen == generation && registered && stream == null) {
            openStream();
          }
        });
  }

  /** Sends new calls while the window has room: it bounds the span from the lowest unanswered. */
  private void pump() {
    if (stream == null || !registered) {
      return;
    }
    LinkedHashMap<Long, Operation> batch = new LinkedHashMap<>();
    List<Call> sending = new ArrayList<>();
    while (!waiting.isEmpty() && nextSeq - lowestUnanswered() < window) {
      Call c = waiting.poll();
      c.seq = nextSeq++;
      outstanding.put(c.seq, c);
      batch.put(c.seq, c.op);
      sending.add(c);
    }
    if (sending.isEmpty()) {
      return;
    }
    if (journal != null) {
      journal.sent(batch); // durable before it leaves: a restarted client resends it
    }
    for (Call c : sending) {
      send(c);
    }
  }

  private long lowestUnanswered() {
    return outstanding.isEmpty() ? nextSeq : outstanding.firstKey();
  }

  private void send(Call c) {
    c.sentNanos = System.nanoTime();
    stream.onNext(
        ClientFrame.newBuilder()
            .setRequest(Request.newBuilder().setSeq(c.seq).setAck(lowestUnanswered()).setOp(c.op))
            .build());
  }

  private void resendOutstanding(long from) {
    if (stream == null) {
      return;
    }
    for (Call c : outstanding.tailMap(from, true).values()) {
      send(c);
    }
  }

  /**
   * Handles a frame from the server. A call's future is completed after the lock is released, so
   * that the application's callbacks never run inside the session's lock (where a callback that
   * used another client could deadlock against it).
   */
  private void onFrame(int gen, ServerFrame f) {
    Call answered;
    synchronized (this) {
      answered = onFrameLocked(gen, f);
    }
    if (answered != null) {
      answered.future.complete(f);
    }
  }

  /** Returns the call {@code f} answers, to be completed by the caller, or null. */
  private Call onFrameLocked(int gen, ServerFrame f) {
    if (gen != generation || closed) {
      return null;
    }
    lastFrameNanos = System.nanoTime();
    Code code = f.getResult().getCode();
    if (f.getSeq() == 0) {
      onSessionFrame(f, code);
      return null;
    }
    Call c = outstanding.get(f.getSeq());
    switch (code) {
      case NOT_LEADER, OVERLOADED -> reconnectLater(f.getLeaderHint());
      case OUT_OF_ORDER -> {
        long from = f.getNextSeq();
        long now = System.nanoTime();
        if (from != lastResendFrom || now - lastResendNanos > TimeUnit.SECONDS.toNanos(1)) {
          lastResendFrom = from;
          lastResendNanos = now;
          retries++;
          resendOutstanding(from);
        }
      }
      case SESSION_EXPIRED -> sessionLost();
      case FENCED ->
          fail(new FencedException("a newer instance of this client resumed the session"));
      default -> {
        // An answer (RESPONSE_DISCARDED and WINDOW_EXCEEDED included: they end the call too).
        if (c != null) {
          answered(c, f);
          return c;
        }
      }
    }
    return null;
  }

  /** Takes {@code c} out of flight; the caller completes its future outside the lock. */
  private void answered(Call c, ServerFrame f) {
    outstanding.remove(c.seq);
    if (f.getDuplicate()) {
      duplicates++;
    }
    if (journal != null) {
      journal.done(c.seq);
    }
    pump();
  }

  private void onSessionFrame(ServerFrame f, Code code) {
    switch (code) {
      case OK -> {}
      case NOT_LEADER -> reconnectLater(f.getLeaderHint());
      case SESSION_EXPIRED -> sessionLost();
      case FENCED, UNAUTHENTICATED ->
          fail(
              new FencedException(
                  "session " + clientId + " refused: " + f.getResult().getMessage()));
      default -> reconnectLater("");
    }
  }

  /** The session expired: in-flight calls have unknown outcomes; new calls get a new session. */
  private void sessionLost() {
    LOG.debug("session {} lost", clientId);
    registered = false;
    stream = null;
    generation++;
    failOutstanding("session " + clientId + " expired with this call in flight");
    if (journal != null) {
      journal.forget();
    }
    nextSeq = 1;
    if (!waiting.isEmpty()) {
      startRegistration();
    }
  }

  private void failOutstanding(String why) {
    for (Call c : outstanding.values()) {
      c.future.completeExceptionally(new OutcomeUnknownException(why));
    }
    outstanding.clear();
  }

  // ---- timers ----

  private synchronized void tick() {
    if (closed) {
      return;
    }
    long now = System.nanoTime();
    for (java.util.Iterator<Call> it = waiting.iterator(); it.hasNext(); ) {
      Call c = it.next();
      if (now > c.deadlineNanos) {
        it.remove();
        c.future.completeExceptionally(
            new IdemTimeoutException("no session within the call's deadline; not sent"));
      }
    }
    for (Call c : outstanding.values()) {
      if (now > c.deadlineNanos && !c.future.isDone()) {
        // Still in the session, still retried, applied at most once; the caller stops waiting.
        c.future.completeExceptionally(
            new IdemTimeoutException(
                "no answer to request "
                    + c.seq
                    + " within the deadline; it is applied at most once"));
      }
    }
    if (registered && stream != null) {
      // A stream is stalled when requests wait and nothing at all has arrived for the stall
      // timeout. While answers flow, the server is alive but busy: resending everything then
      // would only multiply its load (a resend storm), so slow answers alone never trigger it.
      if (!outstanding.isEmpty()
          && now - Math.max(lastFrameNanos, outstanding.firstEntry().getValue().sentNanos)
              > TimeUnit.MILLISECONDS.toNanos(settings.stallTimeoutMs())) {
        LOG.debug("nothing from the server for {} ms; reconnecting", settings.stallTimeoutMs());
        reconnectLater("");
        return;
      }
      if (now - lastKeepAliveNanos > TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMs())) {
        lastKeepAliveNanos = now;
        if (journal != null && journal.dirty()) {
          journal.sync(); // answered requests durable before the ack lets the server drop them
        }
        stream.onNext(
            ClientFrame.newBuilder()
                .setKeepAlive(SessionKeepAlive.newBuilder().setAck(lowestUnanswered()))
                .build());
      }
    }
  }

  // ---- servers ----

  private String currentAddress() {
    if (!leaderHint.isEmpty()) {
      return leaderHint;
    }
    return settings.servers().get(serverIndex % settings.servers().size());
  }

  private void moveTo(String hint) {
    if (hint != null && !hint.isEmpty() && !hint.equals(leaderHint)) {
      leaderHint = hint;
    } else {
      leaderHint = "";
      serverIndex++;
    }
  }

  private long nextBackoff() {
    long d = backoffMs;
    backoffMs = Math.min(MAX_BACKOFF_MS, backoffMs * 2);
    return d;
  }

  /** The channel to {@code address}; throws IdemException once the transport is closed. */
  private ManagedChannel channel(String address) {
    return transport.channel(address);
  }

  /** The channel to {@code address}, or null after failing the session if the transport closed. */
  private ManagedChannel channelOrFail(String address) {
    try {
      return channel(address);
    } catch (IdemException e) {
      fail(e);
      return null;
    }
  }

  synchronized ManagedChannel anyChannel() {
    return channel(currentAddress());
  }

  synchronized void noteReadRedirect(String hint) {
    moveTo(hint);
  }

  synchronized long retries() {
    return retries;
  }

  synchronized long duplicates() {
    return duplicates;
  }

  synchronized long clientId() {
    return clientId;
  }

  synchronized long epoch() {
    return epoch;
  }

  private void fail(IdemException e) {
    fatal = e;
    closeLocked(e);
  }

  private void closeLocked(IdemException reason) {
    if (closed) {
      return;
    }
    closed = true;
    generation++;
    if (stream != null) {
      try {
        stream.onCompleted();
      } catch (RuntimeException ignored) {
        // the stream is going away anyway
      }
      stream = null;
    }
    for (Call c : waiting) {
      c.future.completeExceptionally(reason);
    }
    waiting.clear();
    for (Call c : outstanding.values()) {
      c.future.completeExceptionally(reason);
    }
    outstanding.clear();
    ticking.cancel(false);
    if (ownsTransport) {
      transport.shutdown();
    }
    if (journal != null) {
      try {
        journal.close();
      } catch (java.io.IOException ignored) {
        // the file is append-only and fsynced at every send; nothing is lost
      }
    }
  }

  /**
   * Closes the client; calls still in flight fail (their outcome is unknown). An anonymous session
   * with nothing in flight is closed on the server too (best effort: otherwise it expires after its
   * TTL); a named one stays resumable.
   */
  @Override
  public void close() {
    synchronized (this) {
      if (journal == null && stream != null && registered && outstanding.isEmpty()) {
        try {
          stream.onNext(
              ClientFrame.newBuilder().setClose(CloseSession.getDefaultInstance()).build());
        } catch (RuntimeException ignored) {
          // the session will expire instead
        }
      }
      closeLocked(new IdemException("the client was closed"));
    }
    if (ownsTransport) {
      transport.close(); // waits a moment for frames already written (a Close) to leave
    }
  }
}
