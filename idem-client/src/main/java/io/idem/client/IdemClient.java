package io.idem.client;

import io.idem.client.internal.SessionMachine;
import io.idem.proto.Operation;
import io.idem.proto.ServerFrame;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * A client of an Idem cluster whose every write is applied exactly once, in the order issued.
 *
 * <p>It registers a session on first use and numbers each write. Up to {@code window} writes are in
 * flight at once (pipelined on one stream). On {@code NOT_LEADER}, a lost connection or a stall it
 * reconnects (to the leader hint, or the next server) and resends everything outstanding with the
 * same numbers; the server answers a retry with the answer it saved, never executing it twice. A
 * stalled connection is replaced, not reused. With an identity file, the client durably records its
 * identity and outstanding requests before sending them, so a restarted process resumes the session
 * (fencing the old instance) and resends what was in flight: exactly-once across a client restart.
 *
 * <p>Errors ({@link IdemException} says what to do with each kind): {@link NotSentException} (safe
 * to retry), {@link OutcomeUnknownException} (sent, applied at most once, still being resent),
 * {@link RejectedException} (a definite answer), {@link SessionLostException} (the session ended).
 * Retriable conditions (a leader change, a lost connection, an overloaded server) are handled
 * inside until the call's deadline.
 *
 * <p>Threads: futures complete on the transport's worker pool ({@link IdemTransport}), never under
 * a lock and never on a network thread, so callbacks may call the client again. The blocking
 * methods wait for those futures. Thread-safe. Create one per process (or per logical producer) and
 * close it.
 */
public final class IdemClient implements AutoCloseable {

  /** The default of {@link Builder#probeInterval}: 400 ms. */
  public static final Duration DEFAULT_PROBE_INTERVAL = Duration.ofMillis(400);

  /**
   * An operation a previous instance had in flight, resent after a restart.
   *
   * @param seq its request number in the session
   * @param description what it is: put, append, increment, grant_lease, ...
   * @param key the key (or lease name) it names
   * @param value the bytes it writes or appends; empty for other operations
   * @param result its outcome when it comes: the operation's typed result (a {@link CounterResult}
   *     for an increment, ...), or the exception a new call of it would get
   */
  public record RecoveredCall(
      long seq,
      String description,
      String key,
      byte[] value,
      CompletableFuture<OperationResult> result) {}

  /** Longest idempotency key scope, and longest key, in characters. */
  public static final int MAX_KEY_CHARS = 255;

  private final ClientSettings settings;
  private final GroupSessions sessions;
  private final long timeoutNanos;
  private final io.idem.proto.@Nullable Fence fence; // null: writes are not fenced
  private final CallObserver observer; // shared by the views of one client

  IdemClient(
      ClientSettings settings,
      GroupSessions sessions,
      long timeoutNanos,
      io.idem.proto.@Nullable Fence fence,
      CallObserver observer) {
    this.settings = settings;
    this.sessions = sessions;
    this.timeoutNanos = timeoutNanos;
    this.fence = fence;
    this.observer = observer;
  }

  /** A builder; {@link Builder#servers} is required. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * A view of this client whose calls wait up to {@code timeout} instead of the builder's request
   * timeout. It shares the session (and its numbering): closing either closes both.
   */
  public IdemClient withTimeout(Duration timeout) {
    ClientBuilder.positive("timeout", timeout);
    return new IdemClient(settings, sessions, timeout.toNanos(), fence, observer);
  }

  /**
   * A view of this client whose writes (put, delete, compare-and-set, increment, append) carry
   * {@code fence}: each is applied only if, when it reaches the log, the fence's key is held under
   * the fence's token, and refused with {@link FencedWriteException} once another owner took it
   * over, once it was released or expired, and (from log format 8) once the log time passed the
   * owner's deadline, even if nobody took it over yet: a token holds its key until its deadline, as
   * a lease does. The check is made when the write is applied, so a write delayed past the deadline
   * (a pause, a resend after a leader change) is refused rather than landing late. This is how a
   * business step keeps a paused, stale owner from writing after a takeover. Each write is checked
   * on its own: of several fenced writes, the first may land and a later one be refused, so they do
   * not make a step atomic; {@link #completeKey(String, String, long, byte[], Write)} applies one
   * write and the stored answer together. It shares the session: closing either closes both.
   */
  public IdemClient fenced(Fence fence) {
    if (fence == null) {
      throw new InvalidArgumentException("fence must not be null", 0, 0);
    }
    return new IdemClient(
        settings,
        sessions,
        timeoutNanos,
        io.idem.proto.Fence.newBuilder()
            .setScope(fence.scope())
            .setKey(fence.key())
            .setToken(fence.token())
            .build(),
        observer);
  }

  // ---- writes ----

  /** Writes {@code value} at {@code key}. */
  public WriteResult put(String key, byte[] value) {
    return join(putAsync(key, value, null));
  }

  /** Writes UTF-8 {@code value} at {@code key}. */
  public WriteResult put(String key, String value) {
    return put(key, value.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Writes {@code value} at {@code key}, attached to {@code lease}: the key is deleted when the
   * lease expires or is revoked. Throws {@link LeaseNotFoundException} if the lease is gone.
   */
  public WriteResult put(String key, byte[] value, String lease) {
    return join(putAsync(key, value, lease));
  }

  /**
   * Writes {@code value} at {@code key}, attached to {@code lease} (deleted with it), or to none if
   * null. Completes exceptionally with {@link LeaseNotFoundException} if the lease is gone.
   */
  public CompletableFuture<WriteResult> putAsync(String key, byte[] value, @Nullable String lease) {
    return write(Operations.put(key, value, lease, fence), WriteResult.class);
  }

  /** Deletes {@code key}: whether it existed, and the revision of the delete. */
  public DeleteResult delete(String key) {
    return join(deleteAsync(key));
  }

  /** See {@link #delete}. */
  public CompletableFuture<DeleteResult> deleteAsync(String key) {
    return write(Operations.delete(key, fence), DeleteResult.class);
  }

  /**
   * Writes {@code value} if the key's version is {@code expectedVersion} (0: the key must not
   * exist). The result says whether it was written and the key's version now (the new one, or the
   * current one to expect next time).
   */
  public CasResult compareAndSet(String key, long expectedVersion, byte[] value) {
    return join(compareAndSetAsync(key, expectedVersion, value));
  }

  /** See {@link #compareAndSet}. */
  public CompletableFuture<CasResult> compareAndSetAsync(
      String key, long expectedVersion, byte[] value) {
    return write(Operations.compareAndSet(key, expectedVersion, value, fence), CasResult.class);
  }

  /** Adds {@code delta} to the counter at {@code key} and returns the new value. */
  public long increment(String key, long delta) {
    return join(incrementAsync(key, delta));
  }

  /** See {@link #increment}. */
  public CompletableFuture<Long> incrementAsync(String key, long delta) {
    return write(Operations.increment(key, delta, fence), CounterResult.class)
        .thenApply(CounterResult::value);
  }

  /** Appends {@code value} to the list at {@code key} and returns the list's new length. */
  public long append(String key, byte[] value) {
    return join(appendAsync(key, value));
  }

  /** See {@link #append}. */
  public CompletableFuture<Long> appendAsync(String key, byte[] value) {
    return write(Operations.append(key, value, fence), AppendResult.class)
        .thenApply(AppendResult::length);
  }

  // ---- leases ----

  /**
   * Grants lease {@code name} for {@code ttl}; returns its expiry in log milliseconds. Throws
   * {@link DuplicateLeaseException} if another holder has it. A retry of this very call (after a
   * lost response) gets the original success, not {@code DUPLICATE_LEASE}.
   */
  public long grantLease(String name, Duration ttl) {
    return join(grantLeaseAsync(name, ttl));
  }

  /** See {@link #grantLease}. */
  public CompletableFuture<Long> grantLeaseAsync(String name, Duration ttl) {
    return lease(Operations.grantLease(name, ttl));
  }

  /**
   * Renews lease {@code name}; returns its new expiry. {@link LeaseNotFoundException} if it is gone
   * or another session holds it (this session's lease expired and was granted to another).
   */
  public long keepAliveLease(String name) {
    return join(keepAliveLeaseAsync(name));
  }

  /** See {@link #keepAliveLease}. */
  public CompletableFuture<Long> keepAliveLeaseAsync(String name) {
    return lease(Operations.keepAliveLease(name));
  }

  /**
   * Renews lease {@code name} every {@code interval} until the returned handle is closed or the
   * lease is lost (the listener hears of both renewals and the loss). Choose an interval well below
   * the lease's TTL, a third of it for example.
   */
  public LeaseKeepAlive keepLeaseAlive(
      String name, Duration interval, LeaseKeepAlive.Listener listener) {
    Operations.checkName(name);
    ClientBuilder.positive("interval", interval);
    LeaseKeepAlive k =
        new LeaseKeepAlive(
            this,
            name,
            interval,
            listener == null ? new LeaseKeepAlive.Listener() {} : listener,
            sessions.transport().timer());
    k.start();
    return k;
  }

  /**
   * Revokes lease {@code name}, deleting its keys; returns the log time at which it ended. Only the
   * session that was granted the lease may renew or revoke it: {@link LeaseNotFoundException} if it
   * is gone or another session holds it.
   */
  public long revokeLease(String name) {
    return join(revokeLeaseAsync(name));
  }

  /** See {@link #revokeLease}. */
  public CompletableFuture<Long> revokeLeaseAsync(String name) {
    return lease(Operations.revokeLease(name));
  }

  private CompletableFuture<Long> lease(Operation op) {
    return write(op, LeaseResult.class).thenApply(LeaseResult::logTimeMs);
  }

  // ---- application idempotency keys ----

  /**
   * Acquires the idempotency key {@code (scope, key)} for {@code inProgress} of log time, or
   * answers what holds it. The record is kept for {@code retention} after its completion (or after
   * its owner's deadline). A retry of this very call after a lost answer gets the same answer: the
   * same token, never a second owner.
   *
   * @param fingerprint what the request carried, at most 64 bytes (a SHA-256, say); a reuse of the
   *     key with another fingerprint is answered {@link KeyAcquisition.Mismatch}. Empty: none.
   * @throws InvalidArgumentException a part out of bounds (the cluster's: 255 characters per part,
   *     64-byte fingerprints, at most 7 days)
   * @throws TooManyKeysException a new key while the cluster's key table is at its capacity (a
   *     million records or 512 MiB)
   */
  public KeyAcquisition acquireKey(
      String scope, String key, byte[] fingerprint, Duration inProgress, Duration retention) {
    return join(acquireKeyAsync(scope, key, fingerprint, inProgress, retention));
  }

  /** See {@link #acquireKey}. */
  public CompletableFuture<KeyAcquisition> acquireKeyAsync(
      String scope, String key, byte[] fingerprint, Duration inProgress, Duration retention) {
    return write(
        Operations.acquireKey(scope, key, fingerprint, inProgress, retention),
        KeyAcquisition.class);
  }

  /**
   * Completes the key {@code token} owns, storing {@code response} (at most 64 KiB) for later
   * acquires to replay. {@link KeySettlement.Fenced} if {@code token} no longer owns it.
   */
  public KeySettlement completeKey(String scope, String key, long token, byte[] response) {
    return join(completeKeyAsync(scope, key, token, response, null));
  }

  /**
   * Completes the key {@code token} owns and applies {@code effect} in the same step: both or
   * neither. {@link KeySettlement.Fenced} if {@code token} no longer owns it (the effect is not
   * applied). If the effect fails ({@link CasMismatchException}, {@link WrongTypeException}, {@link
   * InvalidArgumentException}, {@link LeaseNotFoundException}), nothing is applied and the key is
   * still the caller's. Unlike a fenced write, a completion still lands after the owner's deadline
   * while nobody took the key over: the effect and the stored answer land together or not at all.
   */
  public KeySettlement completeKey(
      String scope, String key, long token, byte[] response, Write effect) {
    return join(completeKeyAsync(scope, key, token, response, effect));
  }

  /** See {@link #completeKey(String, String, long, byte[], Write)}; {@code effect} may be null. */
  public CompletableFuture<KeySettlement> completeKeyAsync(
      String scope, String key, long token, byte[] response, @Nullable Write effect) {
    return write(Operations.completeKey(scope, key, token, response, effect), KeySettlement.class);
  }

  /**
   * Claims the cursor at {@code key} (log format 9): raises its epoch, which fences every earlier
   * claimant's commits, and answers the position committed so far. Creates the cursor if absent. A
   * consumer claims a stream (a Kafka partition) when it is assigned it, and resumes at the
   * answer's position.
   *
   * @throws WrongTypeException the key holds a value that is not a cursor
   */
  public CursorClaim claimCursor(String key) {
    return join(claimCursorAsync(key));
  }

  /** See {@link #claimCursor}. */
  public CompletableFuture<CursorClaim> claimCursorAsync(String key) {
    return write(Operations.claimCursor(key), CursorClaim.class);
  }

  /**
   * Commits consumed records to the cursor at {@code key} under the claim {@code epoch}, in one log
   * command: each step's write and key completion land with the cursor's advance to its position,
   * in order. Steps at or below the committed position are skipped, so a resend after an unknown
   * outcome applies nothing twice. {@link CursorCommit.Fenced} if a newer claim holds the cursor
   * (nothing applied); {@link CursorCommit.Stopped} if a step could not apply (the steps before it
   * stay applied).
   *
   * @param steps 1 to 4,096 steps, positions strictly increasing
   */
  public CursorCommit commitCursor(String key, long epoch, List<CursorStep> steps) {
    return join(commitCursorAsync(key, epoch, steps));
  }

  /** See {@link #commitCursor}. */
  public CompletableFuture<CursorCommit> commitCursorAsync(
      String key, long epoch, List<CursorStep> steps) {
    return write(Operations.commitCursor(key, epoch, steps), CursorCommit.class);
  }

  /**
   * Drops the key {@code token} owns: the business step failed and did nothing, so a retry may run
   * it again. {@link KeySettlement.Fenced} if {@code token} no longer owns it.
   */
  public KeySettlement releaseKey(String scope, String key, long token) {
    return join(releaseKeyAsync(scope, key, token));
  }

  /** See {@link #releaseKey}. */
  public CompletableFuture<KeySettlement> releaseKeyAsync(String scope, String key, long token) {
    return write(Operations.releaseKey(scope, key, token), KeySettlement.class);
  }

  /**
   * Moves the owner's deadline to now + {@code extension} (log time) if {@code token} still owns
   * the key: a heartbeat for long work. {@link KeySettlement.Settled#deadlineMs} is the new one.
   */
  public KeySettlement renewKey(String scope, String key, long token, Duration extension) {
    return join(renewKeyAsync(scope, key, token, extension));
  }

  /** See {@link #renewKey}. */
  public CompletableFuture<KeySettlement> renewKeyAsync(
      String scope, String key, long token, Duration extension) {
    return write(Operations.renewKey(scope, key, token, extension), KeySettlement.class);
  }

  /** A linearizable read of the key's record; empty if there is none. Needs no session. */
  public Optional<KeyRecord> getKey(String scope, String key) {
    return join(getKeyAsync(scope, key));
  }

  /** See {@link #getKey}; retried like {@link #getAsync}. */
  public CompletableFuture<Optional<KeyRecord>> getKeyAsync(String scope, String key) {
    int partition = io.idem.proto.Partitions.ofKey(scope, key);
    return sessions.whenKnown(
        timeoutNanos,
        NotSentException.Reason.UNAVAILABLE,
        left -> readsOf(partition).getKey(scope, key, left));
  }

  // ---- reads ----

  /** A linearizable read of {@code key}; empty if absent. Needs no session. */
  public Optional<KeyValue> get(String key) {
    return join(getAsync(key));
  }

  /**
   * See {@link #get}. Blocks no thread: a read that finds no leader is retried on the transport's
   * timer until the call's deadline, then fails with {@link NotSentException} ({@code
   * UNAVAILABLE}).
   */
  public CompletableFuture<Optional<KeyValue>> getAsync(String key) {
    int partition = io.idem.proto.Partitions.of(key);
    return sessions.whenKnown(
        timeoutNanos,
        NotSentException.Reason.UNAVAILABLE,
        left -> readsOf(partition).get(key, left));
  }

  /**
   * The status of the server the client is talking to now.
   *
   * @throws NotSentException if it did not answer within the RPC timeout
   */
  public ClusterStatus status() {
    return primaryAdmin().status();
  }

  /**
   * Changes the cluster's members: the {@code add} members join (each first catches up as a
   * non-voter), the {@code remove} ids leave, in one Raft configuration change made by the leader
   * (NOT_LEADER hints are followed, also to a leader outside this client's server list). A new
   * member's process must be running first ({@code idem server --join}). Waits up to {@code
   * timeout} for the change to commit.
   *
   * <p>An attempt whose answer is lost is sent again; if the server then refuses it because it is
   * already in force (an id already a member, or no longer one), the change counts as committed.
   *
   * @return the outcome; {@code committed() == false} with the leader's reason when the change did
   *     not commit in time, a new member made no progress, or another change was under way
   * @throws InvalidArgumentException if the leader refused the request (an id already a member, an
   *     unknown id to remove, an address in use, no member left): nothing changed
   * @throws NotSentException if no leader answered within {@code timeout}
   * @throws OutcomeUnknownException if an attempt was sent but no answer came in time: the change
   *     may have committed
   */
  public MembershipChange changeMembers(
      List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    return primaryAdmin().changeMembers(add, remove, timeout);
  }

  /**
   * Changes the members of one Raft group of a cluster of several, as {@link #changeMembers(List,
   * List, Duration)} changes a cluster's: this is how a group's replicas move to another node
   * ({@code idem group move}). The other groups keep their members. In a cluster of one group,
   * group 1 is the cluster.
   *
   * @throws InvalidArgumentException if the cluster has no group {@code group}, or as {@link
   *     #changeMembers(List, List, Duration)}
   */
  public MembershipChange changeMembers(
      int group, List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    return adminOf(group).changeMembers(add, remove, timeout);
  }

  /**
   * The status of one Raft group as the server this client talks to sees it: its members, role,
   * leader and applied index. In a cluster of one group, group 1 is the cluster ({@link
   * #status()}).
   *
   * @throws InvalidArgumentException if the cluster has no group {@code group}
   */
  public ClusterStatus status(int group) {
    return adminOf(group).status();
  }

  /** The admin calls of the primary session, once the cluster's shape is known. */
  private ClusterAdmin primaryAdmin() {
    awaitShape();
    return new ClusterAdmin(sessions.primary(), settings.rpcTimeoutMs());
  }

  /**
   * Waits up to the RPC timeout for the cluster's shape, if no server told it yet.
   *
   * @throws NotSentException if none did by then
   */
  private void awaitShape() {
    if (!sessions.ready()) {
      sessions.awaitReady(TimeUnit.MILLISECONDS.toNanos(settings.rpcTimeoutMs()));
    }
  }

  private ClusterAdmin adminOf(int group) {
    awaitShape();
    io.idem.proto.PartitionMap map = sessions.map();
    if (map == null) {
      if (group != 1) {
        throw new InvalidArgumentException(
            "the cluster has one Raft group, group 1; there is no group " + group, 0, 0);
      }
      return new ClusterAdmin(sessions.primary(), settings.rpcTimeoutMs());
    }
    if (group < 0 || group > map.getGroupCount()) {
      throw new InvalidArgumentException(
          "the cluster's groups are 0 (metadata) to "
              + map.getGroupCount()
              + "; there is no group "
              + group,
          0,
          0);
    }
    // No session in the group: a status or a membership change registers nothing there.
    AdminRoute route =
        group == Groups.METADATA
            ? sessions.primary()
            : new GroupRoute(sessions.primary().transport(), settings.servers(), group);
    return new ClusterAdmin(route, settings.rpcTimeoutMs(), group);
  }

  // ---- session ----

  /**
   * Operations a previous instance of this client (same identity file) had in flight; they are
   * resent with their numbers and each is applied once.
   */
  public List<RecoveredCall> recovered() {
    if (!sessions.ready() && settings.identityFile() != null) {
      // The journals are read when the sessions open.
      sessions.awaitReady(timeoutNanos);
    }
    List<RecoveredCall> out = new ArrayList<>();
    List<SessionMachine.Call> calls = new ArrayList<>();
    sessions.all().forEach(d -> calls.addAll(d.recovered()));
    for (SessionMachine.Call c : calls) {
      Operation op = c.op();
      out.add(
          new RecoveredCall(
              c.seq(),
              op.getOpCase().name().toLowerCase(Locale.ROOT),
              Operations.keyOf(op),
              Operations.valueOf(op),
              c.future().thenApply(f -> typed(op, f))));
    }
    return out;
  }

  /** How many times the client resent, reconnected, or asked again for the cluster's shape. */
  public long retries() {
    return sessions.retries();
  }

  /** How many answers were the server's saved answers to earlier copies (suppressed duplicates). */
  public long duplicatesSeen() {
    return sessions.duplicates();
  }

  /** The session id, 0 before registration. */
  public long clientId() {
    return sessions.clientId();
  }

  /** The session epoch (bumped by every resume). */
  public long epoch() {
    return sessions.epoch();
  }

  /**
   * Closes the client at once: calls in flight fail ({@link ClientClosedException}: their outcome
   * is unknown), calls not yet sent fail with {@link NotSentException}. A named client's session
   * stays resumable; an anonymous one with nothing in flight is closed on the server.
   */
  @Override
  public void close() {
    sessions.close(Duration.ZERO);
  }

  /**
   * Closes the client gracefully: refuses new calls, waits up to {@code grace} for the calls
   * already made to be answered, then closes as {@link #close()} does.
   */
  public void close(Duration grace) {
    sessions.close(grace == null ? Duration.ZERO : grace);
  }

  // ---- plumbing ----

  private <T extends OperationResult> CompletableFuture<T> write(Operation op, Class<T> type) {
    long start = observer == CallObserver.NONE ? 0 : observer.started();
    CompletableFuture<T> call =
        sessions.whenKnown(
            timeoutNanos,
            NotSentException.Reason.DEADLINE,
            left -> {
              SessionDriver carrier;
              try {
                carrier = sessions.forOp(op);
              } catch (InvalidArgumentException e) {
                return CompletableFuture.failedFuture(e);
              }
              return carrier.submit(op, left).thenApply(f -> type.cast(typed(op, f)));
            });
    if (observer == CallObserver.NONE) {
      return call;
    }
    // The caller sees the answer only after it is counted: a test or a dashboard that reads the
    // meters once a call returned finds that call in them.
    CompletableFuture<T> counted = new CompletableFuture<>();
    call.whenComplete(
        (r, e) -> {
          observer.finished(op.getOpCase(), e, start);
          if (e == null) {
            counted.complete(r);
          } else {
            counted.completeExceptionally(e);
          }
        });
    return counted;
  }

  /** The typed result of {@code op}'s answer {@code f}, or the exception it stands for. */
  private OperationResult typed(Operation op, ServerFrame f) {
    return Outcomes.typed(op, f, sessions.clientId());
  }

  /** The reads of the group holding {@code partition}: the only session's in one group. */
  private Reads readsOf(int partition) {
    return new Reads(sessions.forPartition(partition), settings.rpcTimeoutMs());
  }

  private static <T> T join(CompletableFuture<T> f) {
    return Outcomes.join(f);
  }

  /**
   * Builds an {@link IdemClient}; its settings and checks are those of its package-private base.
   * Not thread-safe.
   */
  public static final class Builder extends ClientBuilder {
    private Builder() {}
  }
}
