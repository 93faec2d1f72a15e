package io.idem.client;

import com.google.protobuf.ByteString;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.idem.client.internal.SessionMachine;
import io.idem.proto.AcquireKey;
import io.idem.proto.Append;
import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.Code;
import io.idem.proto.CompareAndSet;
import io.idem.proto.CompleteKey;
import io.idem.proto.Delete;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.GetRequest;
import io.idem.proto.GrantLease;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Increment;
import io.idem.proto.KeepAliveLease;
import io.idem.proto.Member;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.ReleaseKey;
import io.idem.proto.RenewKey;
import io.idem.proto.Result;
import io.idem.proto.RevokeLease;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Function;

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

  /** The client's settings, from the builder. */
  record Settings(
      List<String> servers,
      int window,
      long requestTimeoutMs,
      long sessionTtlMs,
      long keepAliveMs,
      long stallTimeoutMs,
      long probeIntervalMs,
      long rpcTimeoutMs,
      Path identityFile,
      String name,
      IdemTransport transport,
      ClientTls tls) {}

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

  /** Delay between attempts of a read that found no leader. */
  private static final long READ_RETRY_MS = 50;

  private final Settings settings;
  private final SessionDriver session;
  private final long timeoutNanos;
  private final io.idem.proto.Fence fence; // null: writes are not fenced
  private final CallObserver observer; // shared by the views of one client

  private IdemClient(
      Settings settings,
      SessionDriver session,
      long timeoutNanos,
      io.idem.proto.Fence fence,
      CallObserver observer) {
    this.settings = settings;
    this.session = session;
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
    Builder.positive("timeout", timeout);
    return new IdemClient(settings, session, timeout.toNanos(), fence, observer);
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
        session,
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
  public CompletableFuture<WriteResult> putAsync(String key, byte[] value, String lease) {
    checkKey(key);
    checkValue(value);
    Put.Builder p = Put.newBuilder().setKey(key).setValue(ByteString.copyFrom(value));
    if (fence != null) {
      p.setFence(fence);
    }
    if (lease != null) {
      checkName(lease);
      p.setLease(lease);
    }
    return write(Operation.newBuilder().setPut(p).build(), WriteResult.class);
  }

  /** Deletes {@code key}: whether it existed, and the revision of the delete. */
  public DeleteResult delete(String key) {
    return join(deleteAsync(key));
  }

  /** See {@link #delete}. */
  public CompletableFuture<DeleteResult> deleteAsync(String key) {
    checkKey(key);
    Delete.Builder d = Delete.newBuilder().setKey(key);
    if (fence != null) {
      d.setFence(fence);
    }
    return write(Operation.newBuilder().setDelete(d).build(), DeleteResult.class);
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
    checkKey(key);
    checkValue(value);
    if (expectedVersion < 0) {
      throw new InvalidArgumentException(
          "expected version must be 0 (absent) or positive, got " + expectedVersion, 0, 0);
    }
    CompareAndSet.Builder c =
        CompareAndSet.newBuilder()
            .setKey(key)
            .setExpectedVersion(expectedVersion)
            .setValue(ByteString.copyFrom(value));
    if (fence != null) {
      c.setFence(fence);
    }
    return write(Operation.newBuilder().setCompareAndSet(c).build(), CasResult.class);
  }

  /** Adds {@code delta} to the counter at {@code key} and returns the new value. */
  public long increment(String key, long delta) {
    return join(incrementAsync(key, delta));
  }

  /** See {@link #increment}. */
  public CompletableFuture<Long> incrementAsync(String key, long delta) {
    checkKey(key);
    Increment.Builder i = Increment.newBuilder().setKey(key).setDelta(delta);
    if (fence != null) {
      i.setFence(fence);
    }
    return write(Operation.newBuilder().setIncrement(i).build(), CounterResult.class)
        .thenApply(CounterResult::value);
  }

  /** Appends {@code value} to the list at {@code key} and returns the list's new length. */
  public long append(String key, byte[] value) {
    return join(appendAsync(key, value));
  }

  /** See {@link #append}. */
  public CompletableFuture<Long> appendAsync(String key, byte[] value) {
    checkKey(key);
    checkValue(value);
    Append.Builder a = Append.newBuilder().setKey(key).setValue(ByteString.copyFrom(value));
    if (fence != null) {
      a.setFence(fence);
    }
    return write(Operation.newBuilder().setAppend(a).build(), AppendResult.class)
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
    checkName(name);
    if (ttl == null || ttl.toMillis() < 1) {
      throw new InvalidArgumentException("lease TTL must be at least 1 ms, got " + ttl, 0, 0);
    }
    return lease(
        Operation.newBuilder()
            .setGrantLease(GrantLease.newBuilder().setName(name).setTtlMs(ttl.toMillis()))
            .build());
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
    checkName(name);
    return lease(
        Operation.newBuilder()
            .setKeepAliveLease(KeepAliveLease.newBuilder().setName(name))
            .build());
  }

  /**
   * Renews lease {@code name} every {@code interval} until the returned handle is closed or the
   * lease is lost (the listener hears of both renewals and the loss). Choose an interval well below
   * the lease's TTL, a third of it for example.
   */
  public LeaseKeepAlive keepLeaseAlive(
      String name, Duration interval, LeaseKeepAlive.Listener listener) {
    checkName(name);
    Builder.positive("interval", interval);
    LeaseKeepAlive k =
        new LeaseKeepAlive(
            this,
            name,
            interval,
            listener == null ? new LeaseKeepAlive.Listener() {} : listener,
            session.transport().timer());
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
    checkName(name);
    return lease(
        Operation.newBuilder().setRevokeLease(RevokeLease.newBuilder().setName(name)).build());
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
    checkKeyId(scope, key);
    if (fingerprint == null) {
      throw new InvalidArgumentException("fingerprint must not be null (empty: none)", 0, 0);
    }
    positiveMillis("in-progress timeout", inProgress);
    positiveMillis("retention", retention);
    return write(
        Operation.newBuilder()
            .setAcquireKey(
                AcquireKey.newBuilder()
                    .setScope(scope)
                    .setKey(key)
                    .setFingerprint(ByteString.copyFrom(fingerprint))
                    .setInProgressMs(inProgress.toMillis())
                    .setRetentionMs(retention.toMillis()))
            .build(),
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
      String scope, String key, long token, byte[] response, Write effect) {
    checkKeyId(scope, key);
    if (response == null) {
      throw new InvalidArgumentException("response must not be null", 0, 0);
    }
    CompleteKey.Builder c =
        CompleteKey.newBuilder()
            .setScope(scope)
            .setKey(key)
            .setToken(token)
            .setResponse(ByteString.copyFrom(response));
    if (effect != null) {
      c.setEffect(operationOf(effect));
    }
    return write(Operation.newBuilder().setCompleteKey(c).build(), KeySettlement.class);
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
    checkKeyId(scope, key);
    return write(
        Operation.newBuilder()
            .setReleaseKey(ReleaseKey.newBuilder().setScope(scope).setKey(key).setToken(token))
            .build(),
        KeySettlement.class);
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
    checkKeyId(scope, key);
    positiveMillis("extension", extension);
    return write(
        Operation.newBuilder()
            .setRenewKey(
                RenewKey.newBuilder()
                    .setScope(scope)
                    .setKey(key)
                    .setToken(token)
                    .setExtensionMs(extension.toMillis()))
            .build(),
        KeySettlement.class);
  }

  /** A linearizable read of the key's record; empty if there is none. Needs no session. */
  public Optional<KeyRecord> getKey(String scope, String key) {
    return join(getKeyAsync(scope, key));
  }

  /** See {@link #getKey}; retried like {@link #getAsync}. */
  public CompletableFuture<Optional<KeyRecord>> getKeyAsync(String scope, String key) {
    checkKeyId(scope, key);
    GetKeyRequest req = GetKeyRequest.newBuilder().setScope(scope).setKey(key).build();
    Read<GetKeyReply, Optional<KeyRecord>> read =
        new Read<>(
            "key " + scope + "/" + key,
            System.nanoTime() + timeoutNanos,
            (stub, observer) -> stub.getKey(req, observer),
            GetKeyReply::getCode,
            GetKeyReply::getMessage,
            GetKeyReply::getLeaderHint,
            r ->
                r.getFound()
                    ? Optional.of(
                        new KeyRecord(
                            scope,
                            key,
                            r.getCompleted(),
                            r.getToken(),
                            r.getDeadlineMs(),
                            r.getCompletedAtMs(),
                            r.getExpiresAtMs(),
                            r.getFingerprint().toByteArray(),
                            r.getResponse().toByteArray(),
                            r.getLogTimeMs()))
                    : Optional.empty());
    read.attempt();
    return read.result;
  }

  private static Operation operationOf(Write w) {
    Operation.Builder o = Operation.newBuilder();
    if (w instanceof Write.Put p) {
      checkKey(p.key());
      o.setPut(Put.newBuilder().setKey(p.key()).setValue(ByteString.copyFrom(p.value())));
    } else if (w instanceof Write.Delete d) {
      checkKey(d.key());
      o.setDelete(Delete.newBuilder().setKey(d.key()));
    } else if (w instanceof Write.CompareAndSet c) {
      checkKey(c.key());
      o.setCompareAndSet(
          CompareAndSet.newBuilder()
              .setKey(c.key())
              .setExpectedVersion(c.expectedVersion())
              .setValue(ByteString.copyFrom(c.value())));
    } else if (w instanceof Write.Increment i) {
      checkKey(i.key());
      o.setIncrement(Increment.newBuilder().setKey(i.key()).setDelta(i.delta()));
    } else if (w instanceof Write.Append a) {
      checkKey(a.key());
      o.setAppend(Append.newBuilder().setKey(a.key()).setValue(ByteString.copyFrom(a.value())));
    }
    return o.build();
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
    checkKey(key);
    GetRequest req = GetRequest.newBuilder().setKey(key).build();
    Read<GetReply, Optional<KeyValue>> read =
        new Read<>(
            key,
            System.nanoTime() + timeoutNanos,
            (stub, observer) -> stub.get(req, observer),
            GetReply::getCode,
            GetReply::getMessage,
            GetReply::getLeaderHint,
            r -> r.getFound() ? Optional.of(keyValue(key, r)) : Optional.empty());
    read.attempt();
    return read.result;
  }

  private static KeyValue keyValue(String key, GetReply r) {
    List<byte[]> elements = new ArrayList<>();
    r.getElementsList().forEach(b -> elements.add(b.toByteArray()));
    return new KeyValue(
        key,
        r.getElementsCount() > 0 ? null : r.getValue().toByteArray(),
        List.copyOf(elements),
        r.getVersion(),
        r.getModRevision(),
        r.getLease().isEmpty() ? null : r.getLease());
  }

  /** One linearizable read RPC (of reply type R), retried through redirects and failures. */
  private final class Read<R, T> {
    final String what;
    final long deadline;
    final BiConsumer<IdemGrpc.IdemStub, StreamObserver<R>> call;
    final Function<R, Code> code;
    final Function<R, String> message;
    final Function<R, String> leaderHint;
    final Function<R, T> value;
    final CompletableFuture<T> result = new CompletableFuture<>();
    String lastError = "";

    Read(
        String what,
        long deadline,
        BiConsumer<IdemGrpc.IdemStub, StreamObserver<R>> call,
        Function<R, Code> code,
        Function<R, String> message,
        Function<R, String> leaderHint,
        Function<R, T> value) {
      this.what = what;
      this.deadline = deadline;
      this.call = call;
      this.code = code;
      this.message = message;
      this.leaderHint = leaderHint;
      this.value = value;
    }

    void attempt() {
      IdemTransport.Connection c;
      try {
        c = session.transport().connection(session.address());
      } catch (IllegalStateException e) {
        fail(new NotSentException(NotSentException.Reason.CLIENT_CLOSED, e.getMessage(), 0, "", e));
        return;
      }
      long left = Math.max(1, deadline - System.nanoTime());
      call.accept(
          IdemGrpc.newStub(c.channel)
              .withDeadlineAfter(
                  Math.min(left, TimeUnit.MILLISECONDS.toNanos(settings.rpcTimeoutMs())),
                  TimeUnit.NANOSECONDS),
          new StreamObserver<>() {
            @Override
            public void onNext(R r) {
              Code k = code.apply(r);
              if (k == Code.OK) {
                T v = value.apply(r);
                onWorkers(() -> result.complete(v));
              } else if (k == Code.INVALID_ARGUMENT) {
                fail(new InvalidArgumentException(message.apply(r), 0, 0));
              } else if (k == Code.PERMISSION_DENIED) {
                fail(new PermissionDeniedException(message.apply(r), 0, 0));
              } else {
                lastError = k + " " + message.apply(r);
                session.redirect(leaderHint.apply(r));
                retry();
              }
            }

            @Override
            public void onError(Throwable t) {
              lastError = t.toString();
              session.redirect("");
              retry();
            }

            @Override
            public void onCompleted() {}
          });
    }

    private void retry() {
      if (System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READ_RETRY_MS) - deadline > 0) {
        fail(
            new NotSentException(
                NotSentException.Reason.UNAVAILABLE,
                "read of " + what + " found no leader in time; last: " + lastError,
                0,
                session.leaderHint(),
                null));
        return;
      }
      try {
        session.transport().timer().schedule(this::attempt, READ_RETRY_MS, TimeUnit.MILLISECONDS);
      } catch (RejectedExecutionException e) {
        fail(
            new NotSentException(
                NotSentException.Reason.CLIENT_CLOSED, "the client is closed", 0, "", e));
      }
    }

    private void fail(IdemException e) {
      onWorkers(() -> result.completeExceptionally(e));
    }
  }

  private void onWorkers(Runnable r) {
    try {
      session.transport().workers().execute(r);
    } catch (RejectedExecutionException e) {
      r.run();
    }
  }

  /**
   * The status of the server the client is talking to now.
   *
   * @throws NotSentException if it did not answer within the RPC timeout
   */
  public ClusterStatus status() {
    StatusReply s;
    try {
      s =
          IdemGrpc.newBlockingStub(session.transport().connection(session.address()).channel)
              .withDeadlineAfter(settings.rpcTimeoutMs(), TimeUnit.MILLISECONDS)
              .status(StatusRequest.getDefaultInstance());
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
    List<ClusterStatus.Member> members = new ArrayList<>();
    s.getMembersList()
        .forEach(
            m ->
                members.add(
                    new ClusterStatus.Member(
                        m.getId(), m.getRaftAddress(), m.getClientAddress(), m.getVoter())));
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
        List.copyOf(members),
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
    ChangeMembersRequest.Builder req =
        ChangeMembersRequest.newBuilder().addAllRemove(remove).setTimeoutMs(timeout.toMillis());
    for (ClusterStatus.Member m : add) {
      req.addAdd(
          Member.newBuilder()
              .setId(m.id())
              .setRaftAddress(m.raftAddress())
              .setClientAddress(m.clientAddress()));
    }
    // The leader answers within the change's timeout; the RPC gets a little more.
    long deadline = System.nanoTime() + timeout.toNanos() + TimeUnit.SECONDS.toNanos(5);
    boolean answerLost = false;
    String lastError = "no attempt";
    while (deadline - System.nanoTime() > 0) {
      String address = session.address();
      ChangeMembersReply r;
      try {
        r =
            IdemGrpc.newBlockingStub(session.transport().connection(address).channel)
                .withDeadlineAfter(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)
                .changeMembers(req.build());
      } catch (StatusRuntimeException e) {
        answerLost = true;
        lastError = address + ": " + e.getStatus().getCode() + " " + e.getStatus().getDescription();
        session.redirect("");
        pause();
        continue;
      } catch (IllegalStateException e) {
        throw new NotSentException(NotSentException.Reason.CLIENT_CLOSED, e.getMessage(), 0, "", e);
      }
      List<ClusterStatus.Member> members = new ArrayList<>();
      r.getMembersList()
          .forEach(
              m ->
                  members.add(
                      new ClusterStatus.Member(
                          m.getId(), m.getRaftAddress(), m.getClientAddress(), m.getVoter())));
      switch (r.getCode()) {
        case OK -> {
          return new MembershipChange(true, "", members);
        }
        case NOT_LEADER -> {
          lastError = address + " is not the leader";
          session.redirect(r.getLeaderHint());
          pause();
        }
        case INVALID_ARGUMENT -> {
          if (answerLost && inForce(members, add, remove)) {
            return new MembershipChange(
                true, "an earlier attempt committed (its answer was lost)", members);
          }
          throw new InvalidArgumentException(r.getMessage(), 0, 0);
        }
        default -> {
          return new MembershipChange(false, r.getCode() + ": " + r.getMessage(), members);
        }
      }
    }
    if (answerLost) {
      throw new OutcomeUnknownException(
          "membership change: no answer in time, an attempt may have committed (read the"
              + " members); last: "
              + lastError,
          0,
          0,
          session.leaderHint());
    }
    throw new NotSentException(
        NotSentException.Reason.UNAVAILABLE,
        "membership change: no leader answered in time; last: " + lastError,
        0,
        session.leaderHint(),
        null);
  }

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

  private static void pause() {
    try {
      Thread.sleep(READ_RETRY_MS * 4);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new NotSentException(NotSentException.Reason.CLIENT_CLOSED, "interrupted", 0, "", e);
    }
  }

  // ---- session ----

  /**
   * Operations a previous instance of this client (same identity file) had in flight; they are
   * resent with their numbers and each is applied once.
   */
  public List<RecoveredCall> recovered() {
    List<RecoveredCall> out = new ArrayList<>();
    for (SessionMachine.Call c : session.recovered()) {
      Operation op = c.op();
      out.add(
          new RecoveredCall(
              c.seq(),
              op.getOpCase().name().toLowerCase(Locale.ROOT),
              keyOf(op),
              valueOf(op),
              c.future().thenApply(f -> typed(op, f))));
    }
    return out;
  }

  private static String keyOf(Operation op) {
    return switch (op.getOpCase()) {
      case PUT -> op.getPut().getKey();
      case DELETE -> op.getDelete().getKey();
      case COMPARE_AND_SET -> op.getCompareAndSet().getKey();
      case INCREMENT -> op.getIncrement().getKey();
      case APPEND -> op.getAppend().getKey();
      case GRANT_LEASE -> op.getGrantLease().getName();
      case KEEP_ALIVE_LEASE -> op.getKeepAliveLease().getName();
      case REVOKE_LEASE -> op.getRevokeLease().getName();
      case ACQUIRE_KEY -> op.getAcquireKey().getKey();
      case COMPLETE_KEY -> op.getCompleteKey().getKey();
      case RELEASE_KEY -> op.getReleaseKey().getKey();
      case RENEW_KEY -> op.getRenewKey().getKey();
      case OP_NOT_SET -> "";
    };
  }

  private static byte[] valueOf(Operation op) {
    return switch (op.getOpCase()) {
      case PUT -> op.getPut().getValue().toByteArray();
      case COMPARE_AND_SET -> op.getCompareAndSet().getValue().toByteArray();
      case APPEND -> op.getAppend().getValue().toByteArray();
      default -> new byte[0];
    };
  }

  /** How many times the client resent or reconnected. */
  public long retries() {
    return session.retries();
  }

  /** How many answers were the server's saved answers to earlier copies (suppressed duplicates). */
  public long duplicatesSeen() {
    return session.duplicates();
  }

  /** The session id, 0 before registration. */
  public long clientId() {
    return session.clientId();
  }

  /** The session epoch (bumped by every resume). */
  public long epoch() {
    return session.epoch();
  }

  /**
   * Closes the client at once: calls in flight fail ({@link ClientClosedException}: their outcome
   * is unknown), calls not yet sent fail with {@link NotSentException}. A named client's session
   * stays resumable; an anonymous one with nothing in flight is closed on the server.
   */
  @Override
  public void close() {
    session.close(Duration.ZERO);
  }

  /**
   * Closes the client gracefully: refuses new calls, waits up to {@code grace} for the calls
   * already made to be answered, then closes as {@link #close()} does.
   */
  public void close(Duration grace) {
    session.close(grace == null ? Duration.ZERO : grace);
  }

  // ---- plumbing ----

  private <T extends OperationResult> CompletableFuture<T> write(Operation op, Class<T> type) {
    if (observer == CallObserver.NONE) {
      return session.submit(op, timeoutNanos).thenApply(f -> type.cast(typed(op, f)));
    }
    long start = observer.started();
    CompletableFuture<T> call =
        session.submit(op, timeoutNanos).thenApply(f -> type.cast(typed(op, f)));
    call.whenComplete((r, e) -> observer.finished(op.getOpCase(), e, start));
    return call;
  }

  /** The typed result of {@code op}'s answer {@code f}, or the exception it stands for. */
  private OperationResult typed(Operation op, ServerFrame f) {
    Result r = f.getResult();
    long rev = r.getRevision();
    boolean dup = f.getDuplicate();
    if (r.getCode() != Code.OK && !(r.getCode() == Code.CAS_MISMATCH && op.hasCompareAndSet())) {
      throw rejected(r, f.getSeq());
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
            default -> throw unexpectedOutcome(r, f.getSeq());
          };
      case COMPLETE_KEY, RELEASE_KEY, RENEW_KEY ->
          switch (r.getKeyOutcome()) {
            case SETTLED -> new KeySettlement.Settled(r.getDeadlineMs(), r.getNumber(), rev, dup);
            case KEY_FENCED -> new KeySettlement.Fenced(r.getToken(), rev, dup);
            default -> throw unexpectedOutcome(r, f.getSeq());
          };
      case OP_NOT_SET -> throw new ProtocolException("an answer to no operation", 0, f.getSeq());
    };
  }

  private ProtocolException unexpectedOutcome(Result r, long seq) {
    return new ProtocolException(
        "a key operation answered " + r.getKeyOutcome(), session.clientId(), seq);
  }

  private RejectedException rejected(Result r, long seq) {
    long id = session.clientId();
    String m = r.getMessage();
    return switch (r.getCode()) {
      case DUPLICATE_LEASE -> new DuplicateLeaseException(m, id, seq);
      case LEASE_NOT_FOUND -> new LeaseNotFoundException(m, id, seq);
      case WRONG_TYPE -> new WrongTypeException(m, id, seq);
      case INVALID_ARGUMENT -> new InvalidArgumentException(m, id, seq);
      case FENCED_WRITE -> new FencedWriteException(m, r.getToken(), id, seq);
      case CAS_MISMATCH -> new CasMismatchException(m, id, seq);
      case TOO_MANY_KEYS -> new TooManyKeysException(m, id, seq);
      case PERMISSION_DENIED -> new PermissionDeniedException(m, id, seq);
      case QUOTA_EXCEEDED -> new QuotaExceededException(m, id, seq);
      case NO_SPACE -> new NoSpaceException(m, id, seq);
      default -> new ProtocolException(r.getCode() + ": " + m, id, seq);
    };
  }

  private static <T> T join(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      Throwable t = unwrap(e.getCause());
      throw t instanceof RuntimeException r ? r : unexpected(t);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new OutcomeUnknownException(
          "interrupted while waiting for the answer; the call goes on", 0, 0, "");
    }
  }

  static Throwable unwrap(Throwable t) {
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t;
  }

  static IdemException unexpected(Throwable t) {
    return new ProtocolException("unexpected failure: " + t, 0, 0);
  }

  // Cheap checks that need no limits; the cluster's limits are checked when a call is numbered.
  private static void checkKey(String key) {
    if (key == null || key.isEmpty()) {
      throw new InvalidArgumentException("key must not be empty", 0, 0);
    }
  }

  /** Checks a key id's parts as {@link Fence} and the key operations need them. */
  static void checkKeyId(String scope, String key) {
    if (scope == null || scope.length() > MAX_KEY_CHARS) {
      throw new InvalidArgumentException(
          "scope must have at most " + MAX_KEY_CHARS + " characters", 0, 0);
    }
    if (key == null || key.isEmpty() || key.length() > MAX_KEY_CHARS) {
      throw new InvalidArgumentException(
          "key must have 1 to " + MAX_KEY_CHARS + " characters", 0, 0);
    }
  }

  private static void positiveMillis(String what, Duration d) {
    if (d == null || d.toMillis() < 1) {
      throw new InvalidArgumentException(what + " must be at least 1 ms, got " + d, 0, 0);
    }
  }

  private static void checkValue(byte[] value) {
    if (value == null) {
      throw new InvalidArgumentException("value must not be null", 0, 0);
    }
  }

  private static void checkName(String name) {
    if (name == null || name.isEmpty()) {
      throw new InvalidArgumentException("lease name must not be empty", 0, 0);
    }
  }

  /** Builds an {@link IdemClient}. Not thread-safe. */
  public static final class Builder {
    private List<String> servers = List.of();
    private int window = 128;
    private Duration requestTimeout = Duration.ofSeconds(30);
    private Duration sessionTtl = Duration.ofSeconds(60);
    private Duration keepAlive;
    private Duration stallTimeout = Duration.ofSeconds(5);
    private Duration probeInterval = DEFAULT_PROBE_INTERVAL;
    private Duration rpcTimeout = Duration.ofSeconds(3);
    private Path identityFile;
    private String name;
    private IdemTransport transport;
    private ClientTls tls;
    private io.micrometer.core.instrument.MeterRegistry meterRegistry;
    private String metricsName = "idem";

    private Builder() {}

    /**
     * Connects over TLS ({@link ClientTls}: the CA to trust, and a client certificate if the
     * servers require one). For a client on a shared {@link #transport}, give the TLS to the
     * transport instead ({@link IdemTransport#create(ClientTls)}).
     */
    public Builder tls(ClientTls tls) {
      this.tls = tls;
      return this;
    }

    /**
     * Registers the client's meters on {@code registry} (Micrometer, an optional dependency: needed
     * only if this is called), tagged {@code client=name}: {@code idem.client.requests} (a timer
     * per operation and outcome: ok, rejected, not_sent, outcome_unknown, session_lost), {@code
     * idem.client.in.flight}, {@code idem.client.retries} (reconnects and registration retries) and
     * {@code idem.client.duplicates.seen} (answers the server gave from its saved responses). In
     * Prometheus: {@code idem_client_requests_seconds}, {@code idem_client_retries_total}, ...
     *
     * @param name the {@code client} tag, to tell several clients in one registry apart
     */
    public Builder meterRegistry(
        io.micrometer.core.instrument.MeterRegistry registry, String name) {
      if (registry == null || name == null || name.isEmpty()) {
        throw new IllegalArgumentException("a meter registry and a non-empty name are required");
      }
      this.meterRegistry = registry;
      this.metricsName = name;
      return this;
    }

    /** The cluster's client addresses, host:port each. Required. */
    public Builder servers(List<String> servers) {
      this.servers = List.copyOf(servers);
      return this;
    }

    /** See {@link #servers(List)}: a comma-separated list. */
    public Builder servers(String commaSeparated) {
      List<String> list = new ArrayList<>();
      for (String s : commaSeparated.split(",")) {
        if (!s.isBlank()) {
          list.add(s.trim());
        }
      }
      return servers(list);
    }

    /** Most writes in flight (the span from the lowest unanswered number). Default 128. */
    public Builder window(int window) {
      this.window = window;
      return this;
    }

    /** How long a call may wait for its answer. Default 30 s. */
    public Builder requestTimeout(Duration timeout) {
      this.requestTimeout = timeout;
      return this;
    }

    /** How long the session lives without keep-alives. Default 60 s. */
    public Builder sessionTtl(Duration ttl) {
      this.sessionTtl = ttl;
      return this;
    }

    /** How often to keep the session alive. Default a third of the TTL. */
    public Builder keepAliveInterval(Duration interval) {
      this.keepAlive = interval;
      return this;
    }

    /** Reconnect if the oldest request has no answer for this long. Default 5 s. */
    public Builder stallTimeout(Duration timeout) {
      this.stallTimeout = timeout;
      return this;
    }

    /**
     * With calls waiting and nothing heard from the server in use for this long, ask the other
     * servers who leads (a Status RPC with this deadline, again every 100 ms while it lasts) and
     * move at once to a newer leader they name, resending what is outstanding with its numbers. A
     * few Raft heartbeats: long enough that a busy leader's answers usually arrive first, short
     * against the election it waits for. At or above the stall timeout, probes never happen.
     * Default {@link #DEFAULT_PROBE_INTERVAL}.
     */
    public Builder probeInterval(Duration interval) {
      this.probeInterval = interval;
      return this;
    }

    /**
     * Makes the client durable: it records its identity and outstanding requests in {@code file}
     * (fsynced before a request leaves), and a client restarted with the same file and name resumes
     * the session and resends what was in flight.
     */
    public Builder identity(Path file, String name) {
      this.identityFile = file;
      this.name = name;
      return this;
    }

    /**
     * Shares {@code transport} (connections and timer) with the other clients built with it,
     * instead of opening connections of its own. The session stays this client's own. Default: a
     * private transport, closed with the client.
     */
    public Builder transport(IdemTransport transport) {
      this.transport = transport;
      return this;
    }

    /**
     * Returns the client (it connects lazily).
     *
     * @throws IllegalArgumentException naming the first bad setting
     */
    public IdemClient build() {
      if (servers.isEmpty()) {
        throw new IllegalArgumentException("servers must name at least one host:port");
      }
      for (String s : servers) {
        int colon = s.lastIndexOf(':');
        boolean ok = colon > 0;
        if (ok) {
          try {
            int port = Integer.parseInt(s.substring(colon + 1));
            ok = port > 0 && port < 65536;
          } catch (NumberFormatException e) {
            ok = false;
          }
        }
        if (!ok) {
          throw new IllegalArgumentException("server must be host:port, got \"" + s + "\"");
        }
      }
      if (window < 1 || window > 65_536) {
        throw new IllegalArgumentException("window must be in [1, 65536], got " + window);
      }
      positive("requestTimeout", requestTimeout);
      positive("sessionTtl", sessionTtl);
      positive("stallTimeout", stallTimeout);
      positive("probeInterval", probeInterval);
      positive("rpcTimeout", rpcTimeout);
      Duration ka = keepAlive == null ? sessionTtl.dividedBy(3) : keepAlive;
      positive("keepAliveInterval", ka);
      if (ka.compareTo(sessionTtl) >= 0) {
        throw new IllegalArgumentException(
            "keepAliveInterval " + ka + " must be shorter than sessionTtl " + sessionTtl);
      }
      if (tls != null && transport != null) {
        throw new IllegalArgumentException(
            "a client on a shared transport uses the transport's TLS: give it to"
                + " IdemTransport.create(tls), not to the builder");
      }
      if (identityFile != null && (name == null || name.isEmpty() || name.length() > 256)) {
        throw new IllegalArgumentException("an identity needs a name of 1 to 256 characters");
      }
      Settings settings =
          new Settings(
              servers,
              window,
              requestTimeout.toMillis(),
              sessionTtl.toMillis(),
              ka.toMillis(),
              stallTimeout.toMillis(),
              probeInterval.toMillis(),
              rpcTimeout.toMillis(),
              identityFile,
              name,
              transport,
              tls);
      SessionDriver driver = new SessionDriver(settings);
      CallObserver observer =
          meterRegistry == null
              ? CallObserver.NONE
              : MicrometerObserver.register(meterRegistry, metricsName, driver);
      return new IdemClient(settings, driver, requestTimeout.toNanos(), null, observer);
    }

    static void positive(String what, Duration d) {
      if (d == null || d.isZero() || d.isNegative()) {
        throw new IllegalArgumentException(what + " must be positive, got " + d);
      }
    }
  }
}
