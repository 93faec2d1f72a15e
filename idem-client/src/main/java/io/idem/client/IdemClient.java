package io.idem.client;

import com.google.protobuf.ByteString;
import io.idem.proto.Append;
import io.idem.proto.Code;
import io.idem.proto.CompareAndSet;
import io.idem.proto.Delete;
import io.idem.proto.GetReply;
import io.idem.proto.GetRequest;
import io.idem.proto.GrantLease;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Increment;
import io.idem.proto.KeepAliveLease;
import io.idem.proto.Operation;
import io.idem.proto.Put;
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
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

/**
 * A client of an Idem cluster whose every write is applied exactly once, in the order issued.
 *
 * <p>It registers a session on first use and numbers each write. Up to {@code window} writes are in
 * flight at once (pipelined on one stream). On {@code NOT_LEADER}, a lost connection or a stall it
 * reconnects (to the leader hint, or the next server) and resends everything outstanding with the
 * same numbers; the server answers a retry with the answer it saved, never executing it twice. With
 * an identity file, the client durably records its identity and outstanding requests before sending
 * them, so a restarted process resumes the session (fencing the old instance) and resends what was
 * in flight: exactly-once across a client restart.
 *
 * <p>Errors: retriable conditions are handled inside until the call's deadline ({@link
 * IdemTimeoutException}); {@link OutcomeUnknownException} only when the session is lost with the
 * call in flight; {@link FencedException} is fatal; business outcomes are exceptions or results as
 * each method says.
 *
 * <p>Thread-safe. Create one per process (or per logical producer) and close it.
 */
public final class IdemClient implements AutoCloseable {

  /** The client's settings, from the builder. */
  record Settings(
      List<String> servers,
      int window,
      long requestTimeoutMs,
      long sessionTtlMs,
      long keepAliveMs,
      long stallTimeoutMs,
      long rpcTimeoutMs,
      Path identityFile,
      String name,
      IdemTransport transport) {}

  /**
   * An operation a previous instance had in flight, resent after a restart.
   *
   * @param seq its request number in the session
   * @param description what it is: put, append, increment, grant_lease, ...
   * @param key the key (or lease name) it names
   * @param value the bytes it writes or appends; empty for other operations
   * @param result its outcome, when it comes
   */
  public record RecoveredCall(
      long seq,
      String description,
      String key,
      byte[] value,
      CompletableFuture<WriteResult> result) {}

  private final Settings settings;
  private final ClientSession session;

  private IdemClient(Settings settings) {
    this.settings = settings;
    this.session = new ClientSession(settings, settings.transport());
  }

  /** A builder; {@link Builder#servers} is required. */
  public static Builder builder() {
    return new Builder();
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
    if (lease != null) {
      p.setLease(lease);
    }
    return write(Operation.newBuilder().setPut(p).build(), IdemClient::writeResult);
  }

  /** Deletes {@code key}; returns whether it existed. */
  public boolean delete(String key) {
    return join(deleteAsync(key));
  }

  /** See {@link #delete}. */
  public CompletableFuture<Boolean> deleteAsync(String key) {
    checkKey(key);
    return write(
        Operation.newBuilder().setDelete(Delete.newBuilder().setKey(key)).build(),
        f -> f.getResult().getDone());
  }

  /**
   * Writes {@code value} if the key's version is {@code expectedVersion} (0: the key must not
   * exist). Returns whether it was written.
   */
  public boolean compareAndSet(String key, long expectedVersion, byte[] value) {
    return join(compareAndSetAsync(key, expectedVersion, value));
  }

  /** See {@link #compareAndSet}. */
  public CompletableFuture<Boolean> compareAndSetAsync(
      String key, long expectedVersion, byte[] value) {
    checkKey(key);
    checkValue(value);
    return write(
        Operation.newBuilder()
            .setCompareAndSet(
                CompareAndSet.newBuilder()
                    .setKey(key)
                    .setExpectedVersion(expectedVersion)
                    .setValue(ByteString.copyFrom(value)))
            .build(),
        f -> f.getResult().getCode() == Code.OK);
  }

  /** Adds {@code delta} to the counter at {@code key} and returns the new value. */
  public long increment(String key, long delta) {
    return join(incrementAsync(key, delta));
  }

  /** See {@link #increment}. */
  public CompletableFuture<Long> incrementAsync(String key, long delta) {
    checkKey(key);
    return write(
        Operation.newBuilder()
            .setIncrement(Increment.newBuilder().setKey(key).setDelta(delta))
            .build(),
        f -> f.getResult().getNumber());
  }

  /** Appends {@code value} to the list at {@code key} and returns the list's new length. */
  public long append(String key, byte[] value) {
    return join(appendAsync(key, value));
  }

  /** See {@link #append}. */
  public CompletableFuture<Long> appendAsync(String key, byte[] value) {
    checkKey(key);
    checkValue(value);
    return write(
        Operation.newBuilder()
            .setAppend(Append.newBuilder().setKey(key).setValue(ByteString.copyFrom(value)))
            .build(),
        f -> f.getResult().getNumber());
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
    return write(
        Operation.newBuilder()
            .setGrantLease(GrantLease.newBuilder().setName(name).setTtlMs(ttl.toMillis()))
            .build(),
        f -> f.getResult().getNumber());
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
    return write(
        Operation.newBuilder().setKeepAliveLease(KeepAliveLease.newBuilder().setName(name)).build(),
        f -> f.getResult().getNumber());
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
    return write(
        Operation.newBuilder().setRevokeLease(RevokeLease.newBuilder().setName(name)).build(),
        f -> f.getResult().getNumber());
  }

  // ---- reads ----

  /** A linearizable read of {@code key}; empty if absent. Needs no session. */
  public Optional<KeyValue> get(String key) {
    return join(getAsync(key));
  }

  /** See {@link #get}. */
  public CompletableFuture<Optional<KeyValue>> getAsync(String key) {
    checkKey(key);
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs());
    return CompletableFuture.supplyAsync(() -> readUntil(key, deadline));
  }

  private Optional<KeyValue> readUntil(String key, long deadlineNanos) {
    Throwable last = null;
    while (System.nanoTime() < deadlineNanos) {
      try {
        GetReply r =
            IdemGrpc.newBlockingStub(session.anyChannel())
                .withDeadlineAfter(settings.rpcTimeoutMs(), TimeUnit.MILLISECONDS)
                .get(GetRequest.newBuilder().setKey(key).build());
        if (r.getCode() == Code.OK) {
          if (!r.getFound()) {
            return Optional.empty();
          }
          List<byte[]> elements = new ArrayList<>();
          r.getElementsList().forEach(b -> elements.add(b.toByteArray()));
          return Optional.of(
              new KeyValue(
                  key,
                  r.getElementsCount() > 0 ? null : r.getValue().toByteArray(),
                  List.copyOf(elements),
                  r.getVersion(),
                  r.getModRevision(),
                  r.getLease().isEmpty() ? null : r.getLease()));
        }
        if (r.getCode() == Code.INVALID_ARGUMENT) {
          throw new InvalidArgumentException(r.getMessage());
        }
        session.noteReadRedirect(r.getLeaderHint());
      } catch (io.grpc.StatusRuntimeException e) {
        last = e;
        session.noteReadRedirect("");
      }
      sleep(50);
    }
    throw new IdemTimeoutException(
        "read of " + key + " found no leader in time" + (last == null ? "" : ": " + last));
  }

  /** The status of the server the client is talking to. */
  public StatusReply status() {
    return IdemGrpc.newBlockingStub(session.anyChannel())
        .withDeadlineAfter(settings.rpcTimeoutMs(), TimeUnit.MILLISECONDS)
        .status(StatusRequest.getDefaultInstance());
  }

  // ---- session ----

  /**
   * Operations a previous instance of this client (same identity file) had in flight; they are
   * resent with their numbers and each is applied once.
   */
  public List<RecoveredCall> recovered() {
    List<RecoveredCall> out = new ArrayList<>();
    for (ClientSession.Call c : session.recovered()) {
      out.add(
          new RecoveredCall(
              c.seq,
              c.op.getOpCase().name().toLowerCase(java.util.Locale.ROOT),
              keyOf(c.op),
              valueOf(c.op),
              c.future.thenApply(IdemClient::writeResultOrThrow)));
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

  /** Closes the client. Calls in flight fail; a named client's session stays resumable. */
  @Override
  public void close() {
    session.close();
  }

  // ---- plumbing ----

  private <T> CompletableFuture<T> write(Operation op, Function<ServerFrame, T> onOk) {
    return session.submit(op, settings.requestTimeoutMs()).thenApply(f -> mapOrThrow(f, onOk));
  }

  private static <T> T mapOrThrow(ServerFrame f, Function<ServerFrame, T> onOk) {
    Result r = f.getResult();
    switch (r.getCode()) {
      case OK:
        return onOk.apply(f);
      case CAS_MISMATCH:
        return onOk.apply(f);
      case DUPLICATE_LEASE:
        throw new DuplicateLeaseException(r.getMessage());
      case LEASE_NOT_FOUND:
        throw new LeaseNotFoundException(r.getMessage());
      case WRONG_TYPE:
        throw new WrongTypeException(r.getMessage());
      case INVALID_ARGUMENT:
        throw new InvalidArgumentException(r.getMessage());
      case RESPONSE_DISCARDED:
      case WINDOW_EXCEEDED:
        throw new ProtocolException(r.getCode() + ": " + r.getMessage());
      default:
        throw new IdemException("unexpected answer " + r.getCode() + ": " + r.getMessage());
    }
  }

  private static WriteResult writeResult(ServerFrame f) {
    return new WriteResult(
        f.getResult().getRevision(), f.getResult().getVersion(), f.getDuplicate());
  }

  private static WriteResult writeResultOrThrow(ServerFrame f) {
    return mapOrThrow(f, IdemClient::writeResult);
  }

  private static <T> T join(CompletableFuture<T> f) {
    try {
      return f.get();
    } catch (ExecutionException e) {
      throw unwrap(e.getCause());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IdemException("interrupted while waiting for an answer", e);
    }
  }

  private static RuntimeException unwrap(Throwable t) {
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    return t instanceof RuntimeException r ? r : new IdemException(t.toString(), t);
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IdemException("interrupted", e);
    }
  }

  /** The server's limits, checked here so that bad input never reaches a session number. */
  static final int MAX_KEY_BYTES = 4 * 1024;

  static final int MAX_VALUE_BYTES = 1024 * 1024;
  static final int MAX_NAME_CHARS = 256;

  private static void checkKey(String key) {
    if (key == null || key.isEmpty()) {
      throw new InvalidArgumentException("key must not be empty");
    }
    int n = key.getBytes(StandardCharsets.UTF_8).length;
    if (n > MAX_KEY_BYTES) {
      throw new InvalidArgumentException("key is " + n + " bytes, the limit is " + MAX_KEY_BYTES);
    }
  }

  private static void checkValue(byte[] value) {
    if (value == null) {
      throw new InvalidArgumentException("value must not be null");
    }
    if (value.length > MAX_VALUE_BYTES) {
      throw new InvalidArgumentException(
          "value is " + value.length + " bytes, the limit is " + MAX_VALUE_BYTES);
    }
  }

  private static void checkName(String name) {
    if (name == null || name.isEmpty() || name.length() > MAX_NAME_CHARS) {
      throw new InvalidArgumentException(
          "lease name must have 1 to " + MAX_NAME_CHARS + " characters");
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
    private Duration rpcTimeout = Duration.ofSeconds(3);
    private Path identityFile;
    private String name;
    private IdemTransport transport;

    private Builder() {}

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
      positive("rpcTimeout", rpcTimeout);
      Duration ka = keepAlive == null ? sessionTtl.dividedBy(3) : keepAlive;
      positive("keepAliveInterval", ka);
      if (ka.compareTo(sessionTtl) >= 0) {
        throw new IllegalArgumentException(
            "keepAliveInterval " + ka + " must be shorter than sessionTtl " + sessionTtl);
      }
      if (identityFile != null && (name == null || name.isEmpty() || name.length() > 256)) {
        throw new IllegalArgumentException("an identity needs a name of 1 to 256 characters");
      }
      return new IdemClient(
          new Settings(
              servers,
              window,
              requestTimeout.toMillis(),
              sessionTtl.toMillis(),
              ka.toMillis(),
              stallTimeout.toMillis(),
              rpcTimeout.toMillis(),
              identityFile,
              name,
              transport));
    }

    private static void positive(String what, Duration d) {
      if (d == null || d.isZero() || d.isNegative()) {
        throw new IllegalArgumentException(what + " must be positive, got " + d);
      }
    }
  }
}
