package io.idem.client;

import io.idem.client.internal.SessionMachine;
import io.idem.proto.Operation;
import io.idem.proto.PartitionMap;
import io.idem.proto.Partitions;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * A client's sessions: one in a cluster of one Raft group; in a cluster of several, one in the
 * metadata group, which gives the client its id, secret and epoch, and one in each data group it
 * writes to, registered under that id on first use, each with its own numbers (Kafka's producer id
 * with a sequence per partition, seed 003). Every operation goes to the session of its partition's
 * group ({@link Partitions}); its answers, retries and exactly-once guarantee are that session's.
 *
 * <p>Which of the two it is, the client learns from the first server that answers a Status call.
 * When none does while the client is built (the cluster is down, or not started yet), the client is
 * built without sessions, and a thread of its own keeps asking, every 100 ms, until one answers and
 * the sessions are opened (in a cluster of several, until the metadata group registered the
 * client). Calls made meanwhile wait for that in the order they were made, each up to its own
 * deadline ({@link #whenKnown}); a guess would be wrong for good in a cluster of several, whose
 * data groups refuse a session that did not register in the metadata group first.
 *
 * <p>With an identity file {@code F}, the metadata session journals in {@code F} and the session of
 * data group {@code g} in {@code F.group-g}. A restarted client resumes the metadata session (a new
 * epoch) and, at once, every data session it finds a journal of: each is taken over at the new
 * epoch, which fences the previous instance's streams in that group, and resends what that instance
 * had in flight with its numbers.
 *
 * <p>Thread-safe: the sessions are opened under the lock, used without it.
 */
final class GroupSessions {
  /** How often the client asks again for the cluster's shape while no server answers. */
  private static final long LEARN_EVERY_MS = 100;

  /** The journal file of data group {@code g}'s session, beside the metadata session's. */
  static Path journalOf(Path identityFile, int g) {
    return identityFile.resolveSibling(identityFile.getFileName() + ".group-" + g);
  }

  private final ClientSettings settings;
  private final IdemTransport transport;
  private final @Nullable IdemTransport owned; // the transport the sessions share, if ours

  // Set once, under the lock, when the cluster's shape is known; then read without it.
  private volatile @Nullable SessionDriver primary; // the metadata group's session, or the only one
  private volatile @Nullable PartitionMap map; // null: a cluster of one group, or not known yet
  private volatile SessionDriver @Nullable [] data; // by group number; null: not opened yet
  private volatile SessionMachine.@Nullable Given given;

  /** Set when the sessions can take calls; calls made before wait in {@link #pending}. */
  private volatile boolean ready;

  // Calls made before the shape was known, in the order they were made; each leaves at its
  // deadline.
  private final ArrayDeque<Pending> pending = new ArrayDeque<>();
  private boolean closed;
  private @Nullable RuntimeException closedBy;
  private @Nullable Thread learner;
  private volatile @Nullable String lastProblem; // the last Status call that failed, and why
  private final AtomicLong shapeRetries = new AtomicLong(); // the learner's rounds nobody answered

  private GroupSessions(ClientSettings settings, @Nullable IdemTransport owned) {
    this.settings = settings;
    this.transport = java.util.Objects.requireNonNull(settings.transport());
    this.owned = owned;
  }

  /**
   * The sessions of a client with {@code settings}. Asks the servers for the cluster's shape first
   * ({@link #probe}), on the transport the sessions then use: the settings', or one of its own that
   * it closes with them. If no server tells within the request timeout, or none listens, the
   * sessions open once one does (see the class comment).
   *
   * @throws NotSentException if the cluster has several groups and the metadata session does not
   *     register within the request timeout
   */
  static GroupSessions open(ClientSettings settings) {
    IdemTransport owned = null;
    ClientSettings shared = settings;
    if (settings.transport() == null) {
      owned =
          settings.tls() == null ? IdemTransport.create() : IdemTransport.create(settings.tls());
      shared = withTransport(settings, owned);
    }
    GroupSessions s = new GroupSessions(shared, owned);
    PartitionMap known;
    try {
      known = s.probe();
    } catch (RuntimeException e) {
      s.close(Duration.ZERO);
      throw e;
    }
    if (known == null) {
      s.startLearning();
      return s;
    }
    try {
      s.adopt(known);
      s.awaitIdentity(TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs()));
      s.resumeJournaled(TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs()));
    } catch (RuntimeException e) {
      s.close(Duration.ZERO);
      throw e;
    }
    s.ready = true;
    return s;
  }

  private static ClientSettings withTransport(ClientSettings s, IdemTransport t) {
    return new ClientSettings(
        s.servers(),
        s.window(),
        s.requestTimeoutMs(),
        s.sessionTtlMs(),
        s.keepAliveMs(),
        s.stallTimeoutMs(),
        s.probeIntervalMs(),
        s.rpcTimeoutMs(),
        s.identityFile(),
        s.name(),
        t,
        null);
  }

  /** Opens the sessions of a cluster whose map is {@code known} (one group: the only session). */
  private synchronized void adopt(PartitionMap known) {
    if (closed) {
      return; // closed while the learner asked: open nothing that nobody would close
    }
    if (known.getGroupCount() <= 1) {
      primary = new SessionDriver(settings);
      return;
    }
    primary = new SessionDriver(settings, Groups.METADATA, null, settings.identityFile());
    data = new SessionDriver[known.getGroupCount() + 1];
    map = known;
  }

  /**
   * The cluster's partition map, from the first server that answers a Status. Asks every server at
   * once, each within the RPC timeout, and again while some did not answer in time (a loaded or
   * partitioned cluster), until the request timeout. Null if every server refused the connection in
   * one round (nobody listens), or if none answered within the request timeout.
   */
  private @Nullable PartitionMap probe() {
    IdemTransport t = transport;
    long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs());
    try {
      while (true) {
        Round round = probeOnce(t, settings);
        if (round.map != null || round.allRefused || System.nanoTime() - end > 0) {
          return round.map;
        }
        Thread.sleep(LEARN_EVERY_MS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    }
  }

  /** Starts the thread that learns the shape, once a server answers, and opens the sessions. */
  private synchronized void startLearning() {
    Thread t =
        new Thread(
            this::learn,
            "idem-client-shape" + (settings.name() == null ? "" : "-" + settings.name()));
    t.setDaemon(true);
    learner = t;
    t.start();
  }

  private void learn() {
    long wait = TimeUnit.MILLISECONDS.toNanos(settings.requestTimeoutMs());
    try {
      PartitionMap known = null;
      while (known == null) {
        if (isClosed()) {
          return;
        }
        known = probeOnce(transport, settings).map;
        if (known == null) {
          shapeRetries.incrementAndGet();
          Thread.sleep(LEARN_EVERY_MS);
        }
      }
      adopt(known);
      // Until the metadata group registers the client and the data sessions of a previous
      // instance are taken over, or the metadata session ends (its calls then fail with why):
      // the calls waiting meanwhile leave at their deadlines.
      SessionDriver meta = primary();
      while (!meta.closed()) {
        try {
          awaitIdentity(wait);
          resumeJournaled(wait);
          break;
        } catch (NotSentException e) {
          if (isClosed()) {
            return;
          }
        }
      }
      // The calls made before, in their order, outside the lock; a call made meanwhile queues
      // behind them and goes in the next pass.
      while (true) {
        List<Pending> go;
        synchronized (this) {
          if (closed) {
            return;
          }
          if (pending.isEmpty()) {
            ready = true;
            return;
          }
          go = new ArrayList<>(pending);
          pending.clear();
        }
        for (Pending p : go) {
          if (p.take()) {
            p.go.run();
          }
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (RuntimeException e) {
      // The sessions could not open (an identity file held by another instance, or unreadable):
      // the client ends, and its calls say why.
      close(Duration.ZERO, e);
    }
  }

  private synchronized String closedMessage() {
    return closedBy == null
        ? "the client was closed before a server told it the cluster's shape"
        : "the client could not open its sessions: " + closedBy.getMessage();
  }

  private synchronized boolean isClosed() {
    return closed;
  }

  /** A call made before the shape was known: how to send it, how to fail it, its deadline. */
  private static final class Pending {
    final Runnable go;
    final java.util.function.Consumer<Throwable> fail;
    private final java.util.concurrent.atomic.AtomicBoolean taken =
        new java.util.concurrent.atomic.AtomicBoolean();
    @Nullable ScheduledFuture<?> expiry;

    Pending(Runnable go, java.util.function.Consumer<Throwable> fail) {
      this.go = go;
      this.fail = fail;
    }

    /** Whether this caller is the one that sends or fails it (once, by whoever comes first). */
    boolean take() {
      if (!taken.compareAndSet(false, true)) {
        return false;
      }
      ScheduledFuture<?> e = expiry;
      if (e != null) {
        e.cancel(false);
      }
      return true;
    }
  }

  /**
   * {@code call} with what is left of {@code timeoutNanos}: now, if the sessions are open, else
   * once they are, after the calls made before it. If they are not open by the deadline, the result
   * fails with {@link NotSentException} for {@code reason} (nothing was sent).
   */
  <T> CompletableFuture<T> whenKnown(
      long timeoutNanos,
      NotSentException.Reason reason,
      java.util.function.LongFunction<CompletableFuture<T>> call) {
    if (ready) {
      return call.apply(timeoutNanos);
    }
    long start = System.nanoTime();
    CompletableFuture<T> result = new CompletableFuture<>();
    Pending p =
        new Pending(
            () -> {
              long left = timeoutNanos - (System.nanoTime() - start);
              try {
                call.apply(Math.max(1, left))
                    .whenComplete(
                        (v, e) -> {
                          if (e != null) {
                            result.completeExceptionally(e);
                          } else {
                            result.complete(v);
                          }
                        });
              } catch (RuntimeException e) {
                result.completeExceptionally(e);
              }
            },
            result::completeExceptionally);
    synchronized (this) {
      if (closed) {
        return CompletableFuture.failedFuture(
            new NotSentException(
                NotSentException.Reason.CLIENT_CLOSED, closedMessage(), 0, "", closedBy));
      }
      if (!ready) {
        pending.add(p);
        p.expiry =
            transport.timer().schedule(() -> expire(p, reason), timeoutNanos, TimeUnit.NANOSECONDS);
        return result;
      }
    }
    return call.apply(timeoutNanos);
  }

  private void expire(Pending p, NotSentException.Reason reason) {
    if (!p.take()) {
      return;
    }
    synchronized (this) {
      pending.remove(p);
    }
    p.fail.accept(
        new NotSentException(
            reason,
            "no server of "
                + settings.servers()
                + " answered a Status call since the client was built, so the cluster's Raft"
                + " groups are not known yet"
                + (lastProblem == null ? "" : "; the last failure: " + lastProblem),
            0,
            "",
            null));
  }

  /**
   * Waits up to {@code timeoutNanos} until the sessions are open (see the class comment).
   *
   * @throws NotSentException if they are not by then
   */
  void awaitReady(long timeoutNanos) {
    Outcomes.join(
        whenKnown(
            timeoutNanos,
            NotSentException.Reason.DEADLINE,
            t -> CompletableFuture.completedFuture(Boolean.TRUE)));
  }

  /** One round of Status calls: the map if one answered; whether every server refused. */
  private record Round(@Nullable PartitionMap map, boolean allRefused) {}

  private Round probeOnce(IdemTransport t, ClientSettings settings) throws InterruptedException {
    CompletableFuture<PartitionMap> first = new CompletableFuture<>();
    AtomicInteger left = new AtomicInteger(settings.servers().size());
    AtomicInteger refused = new AtomicInteger();
    for (String server : settings.servers()) {
      Groups.stub(t.connection(server).channel, Groups.NONE)
          .withDeadlineAfter(settings.rpcTimeoutMs(), TimeUnit.MILLISECONDS)
          .status(
              StatusRequest.getDefaultInstance(),
              new io.grpc.stub.StreamObserver<StatusReply>() {
                @Override
                public void onNext(StatusReply r) {
                  first.complete(
                      r.hasMap() ? r.getMap() : PartitionMap.newBuilder().setGroupCount(1).build());
                }

                @Override
                public void onError(Throwable e) {
                  lastProblem = server + ": " + SessionWire.describe(e);
                  if (io.grpc.Status.fromThrowable(e).getCode()
                      == io.grpc.Status.Code.UNAVAILABLE) {
                    refused.incrementAndGet();
                  }
                  if (left.decrementAndGet() == 0) {
                    first.complete(null);
                  }
                }

                @Override
                public void onCompleted() {}
              });
    }
    try {
      PartitionMap map = first.get(settings.rpcTimeoutMs() + 1_000, TimeUnit.MILLISECONDS);
      return new Round(map, refused.get() == settings.servers().size());
    } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
      return new Round(null, false);
    }
  }

  /**
   * Waits up to {@code timeoutNanos} for the metadata session's id, secret and epoch (a cluster of
   * several groups; nothing to wait for in one).
   */
  private void awaitIdentity(long timeoutNanos) {
    SessionDriver meta = primary;
    if (map == null || meta == null || given != null) {
      return;
    }
    awaitRegistered(meta, "the metadata group (0)", timeoutNanos);
    long[] secret = meta.secret();
    synchronized (this) {
      given = new SessionMachine.Given(meta.clientId(), meta.epoch(), secret[0], secret[1]);
    }
  }

  /** Registers {@code d} now and waits until it is, within {@code timeoutNanos}. */
  private void awaitRegistered(SessionDriver d, String what, long timeoutNanos) {
    d.connect();
    long end = System.nanoTime() + timeoutNanos;
    while (d.clientId() == 0) {
      IdemException refused = d.closedBy();
      if (refused != null) {
        // Refused for good (no role, a bad secret, ...): waiting longer changes nothing.
        throw new NotSentException(
            NotSentException.Reason.CLIENT_CLOSED,
            what + " refused this client: " + refused.getMessage(),
            0,
            d.leaderHint(),
            refused);
      }
      if (System.nanoTime() - end > 0) {
        throw new NotSentException(
            NotSentException.Reason.DEADLINE,
            what + " did not register this client within " + settings.requestTimeoutMs() + " ms",
            0,
            d.leaderHint(),
            null);
      }
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new NotSentException(NotSentException.Reason.CLIENT_CLOSED, "interrupted", 0, "", e);
      }
    }
  }

  /**
   * Takes over at once the data sessions a previous instance journaled, and waits until each is
   * taken over, up to {@code timeoutNanos} each: from then on that instance is fenced in every
   * group it wrote to.
   */
  private void resumeJournaled(long timeoutNanos) {
    Path file = settings.identityFile();
    SessionDriver[] sessions = data;
    if (file == null || sessions == null) {
      return;
    }
    for (int g = 1; g < sessions.length; g++) {
      if (java.nio.file.Files.exists(journalOf(file, g))) {
        awaitRegistered(group(g), "data group " + g, timeoutNanos);
      }
    }
  }

  /** Whether the sessions are open (the cluster's shape is known). */
  boolean ready() {
    return ready;
  }

  /** Whether the cluster has several groups (false also while its shape is not known). */
  boolean grouped() {
    return map != null;
  }

  /** The partition map, or null in a cluster of one group or while its shape is not known. */
  @Nullable PartitionMap map() {
    return map;
  }

  /**
   * The session that carries {@code op}; call only once {@link #ready()}.
   *
   * @throws InvalidArgumentException if {@code op} names keys of two groups: nothing is sent
   */
  SessionDriver forOp(Operation op) {
    PartitionMap m = map;
    if (m == null) {
      return primary();
    }
    String stray = Partitions.strayName(op, m);
    if (stray != null) {
      throw new InvalidArgumentException(
          "the "
              + stray
              + " is in another Raft group than the operation's key: one call touches one group;"
              + " give related names a common hash tag {...}",
          primary().clientId(),
          0);
    }
    return forPartition(Partitions.primary(op));
  }

  /** The session of the group holding {@code partition}; call only once {@link #ready()}. */
  SessionDriver forPartition(int partition) {
    PartitionMap m = map;
    if (m == null || given == null) {
      // One group; or the metadata session ended before it registered this client (see learn),
      // and refuses the call with why.
      return primary();
    }
    return group(Partitions.groupIn(m, partition));
  }

  /** Data group {@code g}'s session, opened on first use. */
  synchronized SessionDriver group(int g) {
    SessionDriver[] sessions = java.util.Objects.requireNonNull(data);
    SessionDriver d = sessions[g];
    if (d == null) {
      Path file = settings.identityFile();
      d = new SessionDriver(settings, g, given, file == null ? null : journalOf(file, g));
      sessions[g] = d;
    }
    return d;
  }

  /**
   * The metadata session (several groups) or the only one.
   *
   * @throws IllegalStateException if the cluster's shape is not known yet
   */
  SessionDriver primary() {
    SessionDriver p = primary;
    if (p == null) {
      throw new IllegalStateException("the cluster's shape is not known yet");
    }
    return p;
  }

  /** The transport the sessions share. */
  IdemTransport transport() {
    return transport;
  }

  /** The client's id: the primary session's, 0 before it registered. */
  long clientId() {
    SessionDriver p = primary;
    return p == null ? 0 : p.clientId();
  }

  /** The client's epoch: the primary session's, 0 before it registered. */
  long epoch() {
    SessionDriver p = primary;
    return p == null ? 0 : p.epoch();
  }

  /** Every open session, the primary first; none while the cluster's shape is not known. */
  synchronized List<SessionDriver> all() {
    List<SessionDriver> out = new ArrayList<>();
    SessionDriver p = primary;
    if (p == null) {
      return out;
    }
    out.add(p);
    SessionDriver[] sessions = data;
    if (sessions != null) {
      for (SessionDriver d : sessions) {
        if (d != null) {
          out.add(d);
        }
      }
    }
    return out;
  }

  /**
   * Reconnects and resends of the sessions, and the learner's unanswered rounds of Status calls.
   */
  long retries() {
    long n = shapeRetries.get();
    for (SessionDriver d : all()) {
      n += d.retries();
    }
    return n;
  }

  long duplicates() {
    long n = 0;
    for (SessionDriver d : all()) {
      n += d.duplicates();
    }
    return n;
  }

  /**
   * Closes the data sessions, then the primary, then the transport if it is ours; calls still
   * waiting for the cluster's shape fail with {@link NotSentException}.
   */
  void close(Duration grace) {
    close(grace, null);
  }

  private void close(Duration grace, @Nullable RuntimeException cause) {
    List<Pending> left;
    Thread t;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      closedBy = cause;
      left = new ArrayList<>(pending);
      pending.clear();
      t = learner;
    }
    if (t != null && t != Thread.currentThread()) {
      t.interrupt();
    }
    for (Pending p : left) {
      if (p.take()) {
        p.fail.accept(
            new NotSentException(
                NotSentException.Reason.CLIENT_CLOSED, closedMessage(), 0, "", cause));
      }
    }
    List<SessionDriver> sessions = all();
    for (int i = sessions.size() - 1; i >= 0; i--) {
      sessions.get(i).close(grace);
    }
    if (owned != null) {
      owned.close();
    }
  }
}
