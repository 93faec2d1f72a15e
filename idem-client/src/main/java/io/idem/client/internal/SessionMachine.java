package io.idem.client.internal;

import io.idem.client.ClientClosedException;
import io.idem.client.FencedException;
import io.idem.client.IdemException;
import io.idem.client.IdentityFileException;
import io.idem.client.InvalidArgumentException;
import io.idem.client.NotSentException;
import io.idem.client.OutcomeUnknownException;
import io.idem.client.SessionExpiredException;
import io.idem.client.UnauthenticatedException;
import io.idem.proto.ClientFrame;
import io.idem.proto.CloseSession;
import io.idem.proto.Code;
import io.idem.proto.Hello;
import io.idem.proto.Limits;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionKeepAlive;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The client's session logic as a state machine: registration, numbering, the window, resends,
 * failover, keep-alives, stall detection, deadlines and close. It does no I/O and reads no clock:
 * every event carries the time ({@code System.nanoTime()} scale), randomness comes from an injected
 * supplier, and what must happen in the world comes out as {@link Effect}s, in order, through
 * {@link #takeEffects()}.
 *
 * <p>States ({@link State}):
 *
 * <pre>
 *   IDLE --submit/recovered--> REGISTERING --OK--> CONNECTED
 *   REGISTERING --refused for now (NOT_LEADER, OVERLOADED, ...), RPC failed--> REGISTER_BACKOFF
 *   REGISTER_BACKOFF --tick after backoff--> REGISTERING (same nonce: a retry, never a second session)
 *   CONNECTED --NOT_LEADER, stream ended, stall--> RECONNECT_BACKOFF --tick--> CONNECTED (resend all)
 *   CONNECTED/RECONNECT_BACKOFF --probe: another server names a newer leader--> CONNECTED there
 *   REGISTERING/CONNECTED --SESSION_EXPIRED--> IDLE (calls in flight fail; new calls register anew)
 *   any --FENCED, UNAUTHENTICATED, journal failure, close--> CLOSED (terminal)
 * </pre>
 *
 * <p>Failover probes (issue 16): while calls wait and nothing has come for {@code probeNanos}
 * (connected: no frame at all; in reconnect backoff: no answer to a call), the machine asks the
 * other servers who leads ({@link Effect.Probe}), one round at a time, the next at most every
 * {@link #PROBE_REPEAT_NANOS} while the silence lasts. The answers come back together ({@link
 * #probed}); if the one of the highest term, no lower than any term seen before, names a leader
 * other than the server in use, the stream moves there at once and everything outstanding is resent
 * with its numbers. A silent server that the others still call leader is kept (busy, or in a GC
 * pause): the stall timeout stays the last resort. A late answer of the old leader arrives on a
 * stream that is no longer the open one and is ignored; the new leader answers the resent copy from
 * its saved responses if the old one committed it.
 *
 * <p>Not thread-safe: the driver serialises events under its lock and runs the effects outside it.
 */
public final class SessionMachine {

  /** Where the session is. */
  public enum State {
    /** No session, nothing to send. */
    IDLE,
    /** A Register RPC is in flight. */
    REGISTERING,
    /** Waiting to retry a registration (backoff). */
    REGISTER_BACKOFF,
    /** Registered, with an open stream: requests flow. */
    CONNECTED,
    /** Registered, the stream ended: waiting to reconnect (backoff). */
    RECONNECT_BACKOFF,
    /** Closed by the user or a fatal error. Terminal. */
    CLOSED
  }

  /** Shortest backoff between attempts. */
  public static final long MIN_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

  /** Longest backoff between attempts. */
  public static final long MAX_BACKOFF_NANOS = TimeUnit.SECONDS.toNanos(1);

  /**
   * Once a probe round found no new leader, the next round goes this soon (the first waits for the
   * probe interval of silence): an election ends within a few hundred milliseconds, and a round
   * every probe interval measured 0.4 s steps in the failover time (docs/PERFORMANCE.md).
   */
  public static final long PROBE_REPEAT_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

  /** The same OUT_OF_ORDER gap is resent at most this often. */
  public static final long RESEND_GAP_NANOS = TimeUnit.SECONDS.toNanos(1);

  /**
   * The machine's settings.
   *
   * @param servers the cluster's client addresses
   * @param window the most requests in flight (the span from the lowest unanswered number)
   * @param sessionTtlMs the TTL to register with
   * @param keepAliveNanos how often to send a keep-alive on an open stream
   * @param stallNanos a stream with requests (or a keep-alive) waiting and nothing received for
   *     this long is replaced
   * @param probeNanos with calls waiting and nothing received for this long, ask the other servers
   *     who leads (also the deadline of a round); at or above {@code stallNanos}, never
   * @param name the durable name, or null
   * @param durable whether there is an identity journal
   */
  public record Settings(
      List<String> servers,
      int window,
      long sessionTtlMs,
      long keepAliveNanos,
      long stallNanos,
      long probeNanos,
      @Nullable String name,
      boolean durable) {}

  /**
   * One server's answer to a probe: its term and whom it knows as leader (client address, empty if
   * none).
   */
  public record ProbeAnswer(String from, long term, String leader) {}

  /** An identity from the journal, to resume. */
  public record Identity(String name, long clientId, long secretHi, long secretLo) {}

  /**
   * What a previous instance left in the journal.
   *
   * @param identity the session to resume, or null
   * @param pendingNonce a registration attempt sent without learning its answer, or 0
   * @param pendingSecretHi the secret that attempt chose (0 with 0: it let the leader choose)
   * @param pendingSecretLo its low 64 bits
   * @param outstanding requests sent and not answered, by number
   */
  public record Recovery(
      @Nullable Identity identity,
      long pendingNonce,
      long pendingSecretHi,
      long pendingSecretLo,
      SortedMap<Long, Operation> outstanding) {
    /** Nothing to recover. */
    public static final Recovery NONE = new Recovery(null, 0, new TreeMap<>());

    /** A recovery whose pending attempt (if any) chose no secret. */
    public Recovery(
        @Nullable Identity identity, long pendingNonce, SortedMap<Long, Operation> outstanding) {
      this(identity, pendingNonce, 0, 0, outstanding);
    }
  }

  /** One call from the application. The machine never completes its future: effects do. */
  public static final class Call {
    final Operation op;
    final long deadline;
    final CompletableFuture<ServerFrame> future;
    long seq;
    long sentAt;
    boolean timedOut;

    /** A call of {@code op} that may wait until {@code deadline} (nanoTime scale). */
    public Call(Operation op, long deadline) {
      this(op, deadline, new CompletableFuture<>());
    }

    /** The same, answered through {@code future} (an incomplete future of the driver's kind). */
    public Call(Operation op, long deadline, CompletableFuture<ServerFrame> future) {
      this.op = op;
      this.deadline = deadline;
      this.future = future;
    }

    /** The operation. */
    public Operation op() {
      return op;
    }

    /** Its number in the session; 0 until it is sent. */
    public long seq() {
      return seq;
    }

    /** Completed by the driver with the server's frame for it, or with an {@link IdemException}. */
    public CompletableFuture<ServerFrame> future() {
      return future;
    }
  }

  private final Settings settings;
  private final LongSupplier nonces;
  private final List<Effect> effects = new ArrayList<>();
  private final ArrayDeque<Call> waiting = new ArrayDeque<>();
  private final TreeMap<Long, Call> outstanding = new TreeMap<>();
  private final List<Call> recovered = new ArrayList<>();

  private State state = State.IDLE;
  private boolean accepting = true;
  private @Nullable IdemException closedBy;

  // The session, once registered.
  private @Nullable Identity identity;
  private long clientId;
  private long epoch;
  private long secretHi;
  private long secretLo;
  private long nextSeq = 1;
  private int window;
  private @Nullable Limits limits;

  // The registration attempt: its nonce is kept across retries, so a retry is never a second one.
  private long nonce;

  /** The secret the current registration attempt chose for a new session (with {@link #nonce}). */
  private long pendingSecretHi;

  private long pendingSecretLo;

  @SuppressWarnings("NullAway.Init") // startRegistration sets it before any use
  private RegisterRequest registerRequest;

  /** The metadata group's identity this session registers under, or null. */
  private final @Nullable Given given;

  // The connection.
  private int serverIndex;
  private String leaderHint = "";
  private int stream;

  /** Whether the open stream's server said it takes several requests in one frame. */
  private boolean takesRequestBatches;

  private long backoff = MIN_BACKOFF_NANOS;

  /** Why the last registration attempt failed, until one is answered; "" if unknown. */
  private String lastConnectProblem = "";

  private long retryAt;
  private long lastFrameAt;
  private long lastKeepAliveAt;
  private long keepAliveSentAt;
  private boolean keepAliveUnanswered;
  private long lastResendFrom = -1;
  private long lastResendAt;

  private final LeaderProbes probes;
  private long progressAt; // when calls last made progress: an answer, or the first one sent
  private long probeSwitches;

  private boolean journalDirty;
  private long retries;
  private long duplicates;

  /**
   * A machine with {@code settings}, nonces from {@code nonces} (nonzero values are used as drawn),
   * and what a previous instance left ({@link Recovery#NONE} if nothing). Recovered calls wait
   * without a deadline; call {@link #start} to send them.
   */
  public SessionMachine(Settings settings, LongSupplier nonces, Recovery recovery) {
    this(settings, nonces, recovery, null);
  }

  /**
   * The identity a data group's session registers under, in a cluster of several Raft groups: the
   * id and secret of the client's session in the metadata group, and this instance's epoch there.
   */
  public record Given(long clientId, long epoch, long secretHi, long secretLo) {}

  /**
   * A machine for a data group's session of a cluster of several groups, which registers under
   * {@code given} ({@code null}: as a session of its own).
   */
  public SessionMachine(
      Settings settings, LongSupplier nonces, Recovery recovery, @Nullable Given given) {
    this.given = given;
    this.settings = settings;
    this.nonces = nonces;
    this.window = settings.window();
    this.probes = new LeaderProbes(settings.probeNanos());
    this.identity = recovery.identity();
    this.nonce = recovery.identity() == null ? recovery.pendingNonce() : 0;
    if (nonce != 0) {
      this.pendingSecretHi = recovery.pendingSecretHi();
      this.pendingSecretLo = recovery.pendingSecretLo();
    }
    for (Map.Entry<Long, Operation> e : recovery.outstanding().entrySet()) {
      Call c = new Call(e.getValue(), Long.MAX_VALUE);
      c.seq = e.getKey();
      outstanding.put(c.seq, c);
      recovered.add(c);
      nextSeq = Math.max(nextSeq, c.seq + 1);
    }
  }

  /**
   * Starts: resumes at once when a previous instance left calls in flight (a caller waiting on them
   * before sending more would otherwise wait forever).
   */
  public void start(long now) {
    progressAt = now;
    if (!outstanding.isEmpty() && state == State.IDLE) {
      startRegistration();
    }
  }

  /**
   * Registers now rather than on the first call: a metadata group's session, which carries no call,
   * gives the client its id this way.
   */
  public void connect(long now) {
    progressAt = now;
    if (state == State.IDLE) {
      startRegistration();
    }
  }

  /** The effects emitted since the last call, in order; the machine forgets them. */
  public List<Effect> takeEffects() {
    if (effects.isEmpty()) {
      return List.of();
    }
    List<Effect> out = List.copyOf(effects);
    effects.clear();
    return out;
  }

  // ---- events ----

  /** The application submits {@code c}. */
  public void submit(Call c, long now) {
    if (state == State.CLOSED || !accepting) {
      String why = closedBy == null ? "the client is closing" : closedBy.getMessage();
      fail(c, notSent(NotSentException.Reason.CLIENT_CLOSED, why + "; not sent", closedBy));
      return;
    }
    waiting.add(c);
    switch (state) {
      case IDLE -> startRegistration();
      case CONNECTED -> pump(now);
      default -> {} // sent once connected
    }
  }

  /** The Register RPC of attempt {@code attempt} answered {@code reply}. */
  public void registerReplied(long attempt, RegisterReply reply, long now) {
    // A late reply of an attempt already settled (an RPC that timed out here but succeeded there)
    // must not register twice.
    if (state != State.REGISTERING || attempt != nonce) {
      return;
    }
    lastConnectProblem = "";
    switch (reply.getCode()) {
      case OK -> registered(reply, now);
      case NOT_LEADER, TOO_MANY_SESSIONS, OVERLOADED, NAME_IN_USE ->
          retryRegistration(reply.getLeaderHint(), now);
      case QUOTA_EXCEEDED, NO_SPACE -> {
        // Both pass once sessions end or the state shrinks; the message says which, if the
        // connect times out first.
        lastConnectProblem = reply.getCode() + ": " + reply.getMessage();
        retryRegistration(reply.getLeaderHint(), now);
      }
      case SESSION_EXPIRED -> {
        // Nothing to resume: the old session expired while this client was away.
        sessionGone("the session expired while the client was away");
      }
      case UNAUTHENTICATED ->
          closeWith(
              Fatal.UNAUTHENTICATED,
              "the server refused this client's secret: " + reply.getMessage(),
              null);
      case PERMISSION_DENIED ->
          closeWith(
              Fatal.CLOSED,
              "registration refused (PERMISSION_DENIED): " + reply.getMessage(),
              new io.idem.client.PermissionDeniedException(reply.getMessage(), 0, 0));
      default ->
          closeWith(
              Fatal.CLOSED,
              "registration refused (" + reply.getCode() + "): " + reply.getMessage(),
              new InvalidArgumentException(reply.getMessage(), 0, 0));
    }
  }

  /** The Register RPC of attempt {@code attempt} failed (no answer, connection refused, ...). */
  public void registerFailed(long attempt, long now) {
    registerFailed(attempt, "", now);
  }

  /**
   * {@link #registerFailed(long, long)}, with what went wrong ({@code why}, e.g. a refused TLS
   * handshake): a call that reaches its deadline without a session says it, so that a client that
   * can never connect learns why rather than only that it could not.
   */
  public void registerFailed(long attempt, String why, long now) {
    if (state == State.REGISTERING && attempt == nonce) {
      if (!why.isEmpty()) {
        lastConnectProblem = why;
      }
      retryRegistration("", now);
    }
  }

  /**
   * Stream {@code id} delivered {@code f}: an answer, a frame about the stream ({@code seq = 0}),
   * or a batch of answers, taken one after the other as if each had come alone.
   */
  public void frame(int id, ServerFrame f, long now) {
    if (f.getBatchCount() > 0) {
      for (ServerFrame answer : f.getBatchList()) {
        if (answer.getBatchCount() > 0) {
          // The server nests none: a frame this client does not understand is treated as a broken
          // stream, whose unanswered requests are resent on a new one.
          if (state == State.CONNECTED && id == stream) {
            reconnect("", now);
          }
          return;
        }
        frame(id, answer, now);
      }
      return;
    }
    if (state != State.CONNECTED || id != stream) {
      return;
    }
    if (f.getSeq() == 0 && f.getTakesRequestBatches()) {
      // The answer to the Hello: alive, but not a reason to reset the backoff (a server that
      // accepts the Hello and then drops the stream must not be retried every tick).
      lastFrameAt = now;
      takesRequestBatches = f.getResult().getCode() == Code.OK;
      return;
    }
    lastFrameAt = now;
    keepAliveUnanswered = false;
    backoff = MIN_BACKOFF_NANOS;
    Code code = f.getResult().getCode();
    if (f.getSeq() == 0) {
      switch (code) {
        case OK -> {}
        case NOT_LEADER -> reconnect(f.getLeaderHint(), now);
        case SESSION_EXPIRED -> sessionGone("session " + clientId + " expired");
        case FENCED ->
            closeWith(Fatal.FENCED, "a newer instance of this client resumed the session", null);
        case UNAUTHENTICATED ->
            closeWith(
                Fatal.UNAUTHENTICATED,
                "session " + clientId + " refused: " + f.getResult().getMessage(),
                null);
        default -> reconnect("", now);
      }
      return;
    }
    switch (code) {
      case NOT_LEADER, OVERLOADED -> reconnect(f.getLeaderHint(), now);
      case OUT_OF_ORDER -> {
        long from = f.getNextSeq();
        if (from != lastResendFrom || now - lastResendAt > RESEND_GAP_NANOS) {
          lastResendFrom = from;
          lastResendAt = now;
          retries++;
          resendFrom(from, now);
        }
      }
      case SESSION_EXPIRED ->
          sessionGone("session " + clientId + " expired with this call in flight");
      case FENCED ->
          closeWith(Fatal.FENCED, "a newer instance of this client resumed the session", null);
      default -> answered(f, now);
    }
  }

  /** Stream {@code id} ended (an error, or the server completed it). */
  public void streamEnded(int id, long now) {
    if (state == State.CONNECTED && id == stream) {
      reconnect("", now);
    }
  }

  /** Time passes: deadlines, backoffs, stalls and keep-alives. */
  public void tick(long now) {
    if (state == State.CLOSED) {
      return;
    }
    for (Iterator<Call> it = waiting.iterator(); it.hasNext(); ) {
      Call c = it.next();
      if (now - c.deadline > 0) {
        it.remove();
        fail(
            c,
            notSent(
                NotSentException.Reason.DEADLINE,
                "no session and connection within the call's deadline; not sent"
                    + (lastConnectProblem.isEmpty()
                        ? ""
                        : " (last attempt: " + lastConnectProblem + ")"),
                null));
      }
    }
    for (Call c : outstanding.values()) {
      if (!c.timedOut && now - c.deadline > 0) {
        // Still in the session, still resent, applied at most once; the caller stops waiting.
        c.timedOut = true;
        effects.add(
            new Effect.Fail(
                c,
                new OutcomeUnknownException(
                    "no answer within the call's deadline; applied at most once, still resent",
                    clientId,
                    c.seq,
                    leaderHint)));
      }
    }
    switch (state) {
      case IDLE -> {
        if (!waiting.isEmpty() && accepting) {
          startRegistration();
        }
      }
      case REGISTER_BACKOFF -> {
        if (now - retryAt >= 0) {
          state = State.REGISTERING;
          effects.add(new Effect.Register(nonce, currentAddress(), registerRequest));
        }
      }
      case RECONNECT_BACKOFF -> {
        if (now - retryAt >= 0) {
          openStream(now);
        } else if (!outstanding.isEmpty() && now - progressAt > settings.probeNanos()) {
          // Redirects and refusals while calls wait: the backoff grows to a second, while the
          // servers can say who leads as soon as the election ends.
          probe(now);
        }
      }
      case CONNECTED -> connectedTick(now);
      default -> {}
    }
  }

  private void connectedTick(long now) {
    boolean waitingForServer = true;
    long quietSince;
    if (!outstanding.isEmpty()) {
      quietSince = Math.max(lastFrameAt, outstanding.firstEntry().getValue().sentAt);
    } else if (keepAliveUnanswered) {
      // An idle session waits too: for its keep-alive's answer (a link silent one way).
      quietSince = Math.max(lastFrameAt, keepAliveSentAt);
    } else {
      waitingForServer = false;
      quietSince = lastFrameAt;
    }
    // Slow answers alone are not a stall: while anything arrives, the server is alive but busy,
    // and resending everything would only multiply its load (a resend storm).
    if (waitingForServer && now - quietSince > settings.stallNanos()) {
      effects.add(new Effect.ReplaceConnection(currentAddress()));
      reconnect("", now);
      return;
    }
    if (!outstanding.isEmpty() && now - quietSince > settings.probeNanos()) {
      probe(now);
    }
    if (now - lastKeepAliveAt >= settings.keepAliveNanos()) {
      lastKeepAliveAt = now;
      ensureAckDurable();
      effects.add(
          new Effect.Send(
              stream,
              ClientFrame.newBuilder()
                  .setKeepAlive(SessionKeepAlive.newBuilder().setAck(lowestUnanswered()))
                  .build()));
      if (!keepAliveUnanswered) {
        keepAliveUnanswered = true;
        keepAliveSentAt = now;
      }
    }
  }

  /**
   * The answers to probe round {@code round} (the servers that answered in time; may be empty).
   * Moves to the leader named at the highest term if it is at least every term heard before and is
   * not the server in use (or the session waits in reconnect backoff).
   */
  public void probed(long round, List<ProbeAnswer> answers, long now) {
    ProbeAnswer best = probes.settle(round, answers);
    if (best == null) {
      return; // a stale round, nobody answered, or only servers behind what was heard before
    }
    boolean waitingHere = state == State.CONNECTED || state == State.RECONNECT_BACKOFF;
    if (!waitingHere || outstanding.isEmpty() || best.leader().isEmpty()) {
      return; // answered meanwhile, or an election is on: the next round asks again
    }
    if (state == State.CONNECTED) {
      if (best.leader().equals(currentAddress())) {
        return; // the others still follow it: a busy leader, not a failed one
      }
      effects.add(new Effect.EndStream(stream, true));
    }
    leaderHint = best.leader();
    retries++;
    probeSwitches++;
    openStream(now); // resends everything outstanding, with the same numbers
  }

  private void probe(long now) {
    long round = probes.startRound(now);
    if (round == 0) {
      return;
    }
    List<String> ask = new ArrayList<>();
    String here = state == State.CONNECTED ? currentAddress() : "";
    for (String s : settings.servers()) {
      if (!s.equals(here)) {
        ask.add(s);
      }
    }
    effects.add(new Effect.Probe(round, List.copyOf(ask)));
  }

  /** A read was redirected: move to {@code hint}, or to the next server if it is empty. */
  public void redirect(String hint) {
    moveTo(hint);
  }

  /** Refuses new calls from now on ({@link NotSentException}); calls already in go on. */
  public void stopAccepting() {
    accepting = false;
  }

  /** Whether no call waits or is in flight. */
  public boolean quiet() {
    return waiting.isEmpty() && outstanding.isEmpty();
  }

  /**
   * Closes: calls in flight fail with {@link ClientClosedException}, waiting ones with {@link
   * NotSentException}. An anonymous session with nothing in flight is closed on the server too
   * (otherwise it lingers until its TTL); a named one stays resumable.
   */
  public void close(long now) {
    if (state == State.CLOSED) {
      return;
    }
    if (state == State.CONNECTED && !settings.durable() && outstanding.isEmpty()) {
      effects.add(
          new Effect.Send(
              stream,
              ClientFrame.newBuilder().setClose(CloseSession.getDefaultInstance()).build()));
    }
    closeWith(Fatal.CLOSED, "the client was closed", null);
  }

  /** The journal could not be written: the exactly-once promise across restarts is void. */
  public void journalFailed(Exception e) {
    closeWith(Fatal.IDENTITY_FILE, "identity file failed: " + e.getMessage(), e);
  }

  /** The transport under the session was closed. */
  public void transportClosed() {
    closeWith(Fatal.CLOSED, "the client's transport was closed", null);
  }

  // ---- registration ----

  /** The session's name, which a durable session has (the builder requires one with a journal). */
  private String durableName() {
    return Objects.requireNonNull(settings.name(), "a durable session has a name");
  }

  private void startRegistration() {
    state = State.REGISTERING;
    RegisterRequest.Builder req = RegisterRequest.newBuilder().setTtlMs(settings.sessionTtlMs());
    if (nonce == 0) {
      nonce = nextNonce();
      // The client chooses the new session's secret with the attempt, and sends both again on a
      // retry: the server keeps only the secret's hash, so it could not hand a lost one back.
      pendingSecretHi = nextNonce();
      pendingSecretLo = nextNonce();
      if (identity == null && settings.durable()) {
        // Durable before it leaves: a restarted instance resends this very attempt, so a success
        // it had is returned rather than a second session opened.
        effects.add(
            new Effect.JournalPending(
                durableName(), nonce, settings.sessionTtlMs(), pendingSecretHi, pendingSecretLo));
      }
    }
    if (identity != null) {
      req.setName(identity.name())
          .setResume(true)
          .setSecretHi(identity.secretHi())
          .setSecretLo(identity.secretLo());
    } else {
      req.setSecretHi(pendingSecretHi).setSecretLo(pendingSecretLo);
      if (settings.name() != null) {
        req.setName(settings.name());
      }
    }
    if (given != null) {
      // A data group's session: the metadata group's id and secret, this instance's epoch, and
      // numbers above every one this client used in the group (an expired session's included).
      req.setClientId(given.clientId())
          .setEpoch(given.epoch())
          .setSecretHi(given.secretHi())
          .setSecretLo(given.secretLo())
          .setFirstSeq(nextSeq);
    }
    registerRequest = req.setNonce(nonce).build();
    effects.add(new Effect.Register(nonce, currentAddress(), registerRequest));
  }

  /** The session's secret {hi, lo}, once registered (zeros before). */
  public long[] secret() {
    return new long[] {secretHi, secretLo};
  }

  private long nextNonce() {
    long n;
    do {
      n = nonces.getAsLong();
    } while (n == 0);
    return n;
  }

  private void registered(RegisterReply reply, long now) {
    clientId = reply.getClientId();
    epoch = reply.getEpoch();
    secretHi = reply.getSecretHi();
    secretLo = reply.getSecretLo();
    window = reply.getWindow() > 0 ? Math.min(settings.window(), reply.getWindow()) : window;
    limits = reply.hasLimits() ? reply.getLimits() : null;
    if (registerRequest.getResume() || given != null) {
      nextSeq = Math.max(nextSeq, reply.getNextSeq());
    } else {
      nextSeq = reply.getNextSeq();
      if (settings.durable()) {
        identity = new Identity(durableName(), clientId, secretHi, secretLo);
        effects.add(
            new Effect.JournalIdentity(
                durableName(), clientId, secretHi, secretLo, settings.sessionTtlMs()));
      }
    }
    nonce = 0;
    backoff = MIN_BACKOFF_NANOS;
    openStream(now);
  }

  private void retryRegistration(String hint, long now) {
    moveTo(hint);
    retries++;
    state = State.REGISTER_BACKOFF;
    retryAt = now + nextBackoff();
  }

  // ---- the stream ----

  private void openStream(long now) {
    stream++;
    takesRequestBatches = false;
    state = State.CONNECTED;
    lastFrameAt = now;
    lastKeepAliveAt = now;
    keepAliveUnanswered = false;
    effects.add(
        new Effect.OpenStream(
            stream,
            currentAddress(),
            Hello.newBuilder()
                .setClientId(clientId)
                .setEpoch(epoch)
                .setSecretHi(secretHi)
                .setSecretLo(secretLo)
                .setBatches(true)
                .setRequestBatches(true)
                .build()));
    resendFrom(Long.MIN_VALUE, now);
    pump(now);
  }

  private void reconnect(String hint, long now) {
    effects.add(new Effect.EndStream(stream, true));
    moveTo(hint);
    retries++;
    state = State.RECONNECT_BACKOFF;
    retryAt = now + nextBackoff();
  }

  /** Sends new calls while the window has room: it bounds the span from the lowest unanswered. */
  private void pump(long now) {
    if (state != State.CONNECTED) {
      return;
    }
    List<Call> sending = null;
    while (!waiting.isEmpty() && nextSeq - lowestUnanswered() < window) {
      Call c = waiting.poll();
      String bad = OperationLimits.problem(c.op, limits);
      if (bad != null) {
        // Refused before it is numbered: bad input never uses up a number.
        fail(c, new InvalidArgumentException(bad, clientId, 0));
        continue;
      }
      c.seq = nextSeq++;
      if (outstanding.isEmpty()) {
        progressAt = now; // waiting starts now, not at the last answer
      }
      outstanding.put(c.seq, c);
      if (sending == null) {
        sending = new ArrayList<>();
      }
      sending.add(c);
    }
    if (sending == null) {
      return;
    }
    if (settings.durable()) {
      TreeMap<Long, Operation> batch = new TreeMap<>();
      for (Call c : sending) {
        batch.put(c.seq, c.op);
      }
      // Durable before it leaves (a restarted client resends it); the same sync makes the answered
      // numbers appended before it durable, which the acks below depend on.
      effects.add(new Effect.JournalSent(batch));
      journalDirty = false;
    }
    for (Call c : sending) {
      send(c, now);
    }
  }

  private void resendFrom(long from, long now) {
    SortedMap<Long, Call> tail = outstanding.tailMap(from, true);
    if (tail.isEmpty()) {
      return;
    }
    ensureAckDurable();
    for (Call c : tail.values()) {
      send(c, now);
    }
  }

  private void send(Call c, long now) {
    c.sentAt = now;
    effects.add(
        new Effect.Send(
            stream,
            ClientFrame.newBuilder()
                .setRequest(
                    Request.newBuilder().setSeq(c.seq).setAck(lowestUnanswered()).setOp(c.op))
                .build(),
            takesRequestBatches));
  }

  /**
   * Whether the open stream takes several requests in one frame: the driver then holds the sends
   * that a round of callbacks makes until the round ends, to send them together.
   */
  public boolean takesRequestBatches() {
    return state == State.CONNECTED && takesRequestBatches;
  }

  /**
   * An ack lets the server drop answers below it, so the journal must know those calls were
   * answered before the ack leaves: otherwise a client restarted right after would resend them and
   * get {@code RESPONSE_DISCARDED} instead of their answers.
   */
  private void ensureAckDurable() {
    if (settings.durable() && journalDirty) {
      effects.add(new Effect.JournalSync());
      journalDirty = false;
    }
  }

  private void answered(ServerFrame f, long now) {
    // RESPONSE_DISCARDED and WINDOW_EXCEEDED end the call too: the client maps them to errors.
    Call c = outstanding.remove(f.getSeq());
    if (c == null) {
      return; // a late copy of an answer already taken
    }
    progressAt = now;
    if (f.getDuplicate()) {
      duplicates++;
    }
    if (settings.durable()) {
      effects.add(new Effect.JournalDone(c.seq));
      journalDirty = true;
    }
    if (!c.timedOut) {
      effects.add(new Effect.Complete(c, f));
    }
    pump(now);
  }

  private long lowestUnanswered() {
    return outstanding.isEmpty() ? nextSeq : outstanding.firstKey();
  }

  /** The session is gone: calls in flight have unknown outcomes; new calls get a new session. */
  private void sessionGone(String why) {
    if (state == State.CONNECTED) {
      effects.add(new Effect.EndStream(stream, true));
    }
    for (Call c : outstanding.values()) {
      if (!c.timedOut) {
        effects.add(
            new Effect.Fail(
                c,
                new SessionExpiredException(
                    why + "; applied at most once, not resent", clientId, c.seq, null)));
      }
    }
    outstanding.clear();
    identity = null;
    if (settings.durable()) {
      effects.add(new Effect.JournalForget());
      journalDirty = false;
    }
    nextSeq = 1;
    nonce = 0;
    state = State.IDLE;
    if (!waiting.isEmpty() && accepting) {
      startRegistration();
    }
  }

  // ---- closing ----

  private enum Fatal {
    FENCED,
    UNAUTHENTICATED,
    CLOSED,
    IDENTITY_FILE
  }

  /** Why the session ended for good (a refused registration, fencing, ...), or null. */
  public @Nullable IdemException closedBy() {
    return closedBy;
  }

  private void closeWith(Fatal kind, String why, @Nullable Throwable cause) {
    if (state == State.CLOSED) {
      return;
    }
    if (state == State.CONNECTED) {
      effects.add(new Effect.EndStream(stream, kind != Fatal.CLOSED));
    }
    IdemException reason = lost(kind, why, 0, cause);
    closedBy = reason;
    for (Call c : outstanding.values()) {
      if (!c.timedOut) {
        effects.add(new Effect.Fail(c, lost(kind, why, c.seq, cause)));
      }
    }
    outstanding.clear();
    for (Call c : waiting) {
      fail(c, notSent(NotSentException.Reason.CLIENT_CLOSED, why + "; not sent", reason));
    }
    waiting.clear();
    state = State.CLOSED;
    accepting = false;
    effects.add(new Effect.Stop());
  }

  private IdemException lost(Fatal kind, String why, long seq, @Nullable Throwable cause) {
    return switch (kind) {
      case FENCED -> new FencedException(why, clientId, seq, cause);
      case UNAUTHENTICATED -> new UnauthenticatedException(why, clientId, seq, cause);
      case CLOSED -> new ClientClosedException(why, clientId, seq, cause);
      case IDENTITY_FILE -> new IdentityFileException(why, clientId, seq, cause);
    };
  }

  private NotSentException notSent(
      NotSentException.Reason reason, String why, @Nullable Throwable cause) {
    return new NotSentException(reason, why, clientId, leaderHint, cause);
  }

  private void fail(Call c, IdemException e) {
    effects.add(new Effect.Fail(c, e));
  }

  // ---- servers ----

  /** Where the next attempt goes: the leader hint, else the servers in turn. */
  public String currentAddress() {
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
      serverIndex = (serverIndex + 1) % settings.servers().size();
    }
  }

  private long nextBackoff() {
    long d = backoff;
    backoff = Math.min(MAX_BACKOFF_NANOS, backoff * 2);
    return d;
  }

  // ---- what the client reads ----

  /** The state. */
  public State state() {
    return state;
  }

  /** The calls a previous instance had in flight. */
  public List<Call> recovered() {
    return List.copyOf(recovered);
  }

  /** Reconnects and registration retries so far. */
  public long retries() {
    return retries;
  }

  /** Moves to another server because a probe named it leader, so far. */
  public long probeSwitches() {
    return probeSwitches;
  }

  /** Answers that were saved answers to earlier copies. */
  public long duplicates() {
    return duplicates;
  }

  /** The session id; 0 before the first registration. */
  public long clientId() {
    return clientId;
  }

  /** The session's epoch. */
  public long epoch() {
    return epoch;
  }

  /** The leader hint as last known; empty if unknown. */
  public String leaderHint() {
    return leaderHint;
  }

  /** The window in use: the smaller of the client's and the server's. */
  public int window() {
    return window;
  }

  /** The cluster's limits learned at registration, or null before (or from an older server). */
  public @Nullable Limits limits() {
    return limits;
  }
}
