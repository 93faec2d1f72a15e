package io.idem.client;

import io.idem.client.internal.Effect;
import io.idem.client.internal.IdentityJournal;
import io.idem.client.internal.SessionMachine;
import io.idem.proto.ClientFrame;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Operation;
import io.idem.proto.RequestBatch;
import io.idem.proto.ServerFrame;
import java.io.IOException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs one {@link SessionMachine} against the world. The lock guards the machine alone and is held
 * only while it decides: events go in under the lock, and the effects it emits are queued in the
 * same critical section (so their order is the machine's), then run outside it by one runner at a
 * time:
 *
 * <ul>
 *   <li>without an identity journal, effects are network writes, which do not block: they run on
 *       the thread of the event (a caller, a gRPC I/O thread, the timer) unless a runner is busy;
 *   <li>with an identity journal, every batch of effects runs on the transport's worker pool, so
 *       that an fsync never stalls a gRPC I/O thread (shared with other sessions) or a caller;
 *   <li>futures are completed on the worker pool, never under the lock and never on an I/O thread,
 *       so a user's callback never stalls a connection either.
 * </ul>
 *
 * <p>Requests in batches: when the stream's server takes them, the effects that the callbacks of
 * one round of completions cause (typically the next call of each of them) wait until the round
 * ends, and the requests among them then leave in one frame ({@link #flush}). So that a callback
 * that waits for such a call cannot hang, a wait on a call's future flushes first ({@link
 * FlushingFuture}), and so does every tick, at most {@link #TICK_MS} later, for any other wait.
 */
final class SessionDriver implements AdminRoute {
  private static final Logger LOG = LoggerFactory.getLogger(SessionDriver.class);

  /** How often the machine's timers (deadlines, backoffs, stalls, keep-alives) are checked. */
  static final long TICK_MS = 50;

  /**
   * Requests that leave together stay below this many bytes: a request alone may be larger (up to
   * the server's inbound limit), but it then goes alone.
   */
  static final int MAX_REQUEST_BATCH_BYTES = 1 << 20;

  /**
   * The session whose round of completions this thread runs, if any: its sends wait for the end.
   */
  private static final ThreadLocal<SessionDriver> COMPLETING = new ThreadLocal<>();

  /** How long {@link #close} waits for the last effects (a CloseSession, the journal) to run. */
  private static final long STOP_WAIT_MS = 2_000;

  private final Object lock = new Object();
  private final SessionMachine machine;
  private final ConcurrentLinkedQueue<Effect> effects = new ConcurrentLinkedQueue<>();
  private final AtomicBoolean running = new AtomicBoolean();
  private final CountDownLatch stopped = new CountDownLatch(1);
  private final IdemTransport transport;
  private final boolean ownsTransport;
  private final @Nullable IdentityJournal journal;
  private final long rpcTimeoutMs;
  private final long stallNanos;
  private final long probeMs;
  private final ScheduledFuture<?> ticking;

  @SuppressWarnings("UnnecessaryLambda") // one object: onShutdown and removeOnShutdown match it
  private final Runnable transportClosed = () -> apply(SessionMachine::transportClosed);

  private int closeWaiters;

  /** The Raft group this session is in, {@link Groups#NONE} for a cluster of one group. */
  private final int group;

  /** Whether the open stream takes request batches: callbacks' sends then wait for their round. */
  private volatile boolean holdSends;

  /** The address this session last connected at, as told to the transport (under the lock). */
  private String connectedAt = "";

  // The effects' two sides, used by one runner at a time, never under the lock.
  private final SessionWire wire;
  private final @Nullable SessionJournal journalEffects; // null without a journal

  SessionDriver(ClientSettings settings) {
    this(settings, Groups.NONE, null, settings.identityFile());
  }

  /**
   * A session in Raft group {@code group} of a cluster of several ({@link Groups#NONE}: a cluster
   * of one group, whose calls name no group).
   *
   * @param registerAs the metadata group's identity a data group's session registers under, or null
   * @param file this session's identity journal, or null
   */
  SessionDriver(
      ClientSettings settings,
      int group,
      SessionMachine.@Nullable Given registerAs,
      @Nullable Path file) {
    this.group = group;
    IdemTransport given = settings.transport();
    ClientTls tls = settings.tls();
    this.ownsTransport = given == null;
    this.transport =
        given != null ? given : tls == null ? IdemTransport.create() : IdemTransport.create(tls);
    this.rpcTimeoutMs = settings.rpcTimeoutMs();
    this.stallNanos = TimeUnit.MILLISECONDS.toNanos(settings.stallTimeoutMs());
    this.probeMs = settings.probeIntervalMs();
    SessionMachine.Recovery recovery = SessionMachine.Recovery.NONE;
    if (file != null) {
      try {
        this.journal = IdentityJournal.open(file);
      } catch (IOException | RuntimeException e) {
        if (ownsTransport) {
          transport.close();
        }
        throw new IdentityFileException(
            "cannot open identity file " + file + ": " + e.getMessage(), 0, 0, e);
      }
      IdentityJournal.Identity id = journal.identity();
      recovery =
          new SessionMachine.Recovery(
              id == null
                  ? null
                  : new SessionMachine.Identity(
                      id.name(), id.clientId(), id.secretHi(), id.secretLo()),
              journal.pending() == null ? 0 : journal.pending().nonce(),
              journal.pending() == null ? 0 : journal.pending().secretHi(),
              journal.pending() == null ? 0 : journal.pending().secretLo(),
              journal.outstanding());
    } else {
      this.journal = null;
    }
    this.journalEffects = journal == null ? null : new SessionJournal(journal, this::apply);
    this.wire =
        new SessionWire(
            transport,
            group,
            rpcTimeoutMs,
            probeMs,
            this::apply,
            () -> journalEffects != null && journalEffects.broken());
    SecureRandom random = new SecureRandom();
    this.machine =
        new SessionMachine(
            new SessionMachine.Settings(
                settings.servers(),
                settings.window(),
                settings.sessionTtlMs(),
                TimeUnit.MILLISECONDS.toNanos(settings.keepAliveMs()),
                stallNanos,
                TimeUnit.MILLISECONDS.toNanos(settings.probeIntervalMs()),
                settings.name(),
                journal != null),
            random::nextLong,
            recovery,
            registerAs);
    this.ticking =
        transport
            .timer()
            .scheduleWithFixedDelay(
                () -> apply(m -> m.tick(now())), TICK_MS, TICK_MS, TimeUnit.MILLISECONDS);
    if (!ownsTransport && !transport.onShutdown(transportClosed)) {
      apply(SessionMachine::transportClosed);
    }
    // Another session of a shared transport found the leader: start there (in a cluster of one
    // group; each group of several has a leader of its own).
    String known = group == Groups.NONE ? transport.lastLeader() : "";
    if (!known.isEmpty() && settings.servers().contains(known)) {
      apply(m -> m.redirect(known));
    }
    apply(m -> m.start(now()));
  }

  private static long now() {
    return System.nanoTime();
  }

  // ---- what the client calls ----

  /** Queues {@code op}; the future completes on the worker pool with the server's frame. */
  CompletableFuture<ServerFrame> submit(Operation op, long timeoutNanos) {
    long now = now();
    SessionMachine.Call c =
        new SessionMachine.Call(op, now + timeoutNanos, new FlushingFuture<>(this::flush));
    apply(m -> m.submit(c, now));
    return c.future();
  }

  /** Registers now, without waiting for a call (see {@link SessionMachine#connect}). */
  void connect() {
    apply(m -> m.connect(now()));
  }

  /** Where reads go now: the leader hint, else the servers in turn. */
  @Override
  public String address() {
    synchronized (lock) {
      return machine.currentAddress();
    }
  }

  /** A read was redirected or failed: move on. */
  @Override
  public void redirect(String hint) {
    synchronized (lock) {
      machine.redirect(hint);
    }
  }

  @Override
  public IdemTransport transport() {
    return transport;
  }

  /** A stub on {@code channel} whose calls go to this session's group. */
  @Override
  public IdemGrpc.IdemStub stub(io.grpc.Channel channel) {
    return Groups.stub(channel, group);
  }

  /** The session's secret, once registered: a data group's sessions register under it. */
  long[] secret() {
    synchronized (lock) {
      return machine.secret();
    }
  }

  List<SessionMachine.Call> recovered() {
    synchronized (lock) {
      return machine.recovered();
    }
  }

  long retries() {
    synchronized (lock) {
      return machine.retries();
    }
  }

  long duplicates() {
    synchronized (lock) {
      return machine.duplicates();
    }
  }

  /** Whether the session ended for good (closed, fenced, or refused). */
  boolean closed() {
    synchronized (lock) {
      return machine.state() == SessionMachine.State.CLOSED;
    }
  }

  /** Why the session ended for good, or null while it has not. */
  @Nullable IdemException closedBy() {
    synchronized (lock) {
      return machine.closedBy();
    }
  }

  long clientId() {
    synchronized (lock) {
      return machine.clientId();
    }
  }

  long epoch() {
    synchronized (lock) {
      return machine.epoch();
    }
  }

  @Override
  public String leaderHint() {
    synchronized (lock) {
      return machine.leaderHint();
    }
  }

  /**
   * Closes: with a positive {@code grace}, refuses new calls and waits up to {@code grace} for the
   * calls already in to be answered; then fails what is left and releases the session.
   */
  void close(Duration grace) {
    flush(); // a close from a callback must not wait for sends that wait for the callback
    if (!grace.isZero() && !grace.isNegative()) {
      apply(SessionMachine::stopAccepting);
      long end = now() + grace.toNanos();
      synchronized (lock) {
        closeWaiters++;
        try {
          while (!machine.quiet() && machine.state() != SessionMachine.State.CLOSED) {
            long left = end - now();
            if (left <= 0) {
              break;
            }
            lock.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        } finally {
          closeWaiters--;
        }
      }
    }
    apply(m -> m.close(now()));
    try {
      if (!stopped.await(STOP_WAIT_MS, TimeUnit.MILLISECONDS)) {
        LOG.warn("session {} did not stop within {} ms", clientId(), STOP_WAIT_MS);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (ownsTransport) {
      transport.close(); // waits a moment for frames already written (a Close) to leave
    }
  }

  // ---- events in, effects out ----

  /**
   * Runs {@code event} on the machine under the lock and queues its effects in the same critical
   * section, then runs them outside it, here (network writes do not block) unless another runner is
   * busy, or on the worker pool if there is a journal (whose fsyncs must run neither on an I/O
   * thread nor on a caller's). Completions always go to the worker pool.
   */
  private void apply(Consumer<SessionMachine> event) {
    synchronized (lock) {
      event.accept(machine);
      if (machine.state() == SessionMachine.State.CONNECTED) {
        String at = machine.currentAddress();
        if (!at.equals(connectedAt)) {
          connectedAt = at;
          if (group == Groups.NONE) {
            transport.noteLeader(at);
          }
        }
      }
      List<Effect> out = machine.takeEffects();
      // With a journal each call's send follows its own journal write, so nothing would go
      // together: holding would only delay.
      holdSends = journal == null && machine.takesRequestBatches();
      if (closeWaiters > 0) {
        lock.notifyAll();
      }
      effects.addAll(out);
    }
    if (holdSends && COMPLETING.get() == this) {
      return; // a callback of this session's round: what it sends leaves when the round ends
    }
    flush();
  }

  /**
   * Runs the queued effects, here or on the worker pool (see {@link #apply}), unless the queue is
   * empty or another runner is busy: that runner takes them, in order.
   */
  void flush() {
    if (effects.isEmpty() || !running.compareAndSet(false, true)) {
      return;
    }
    if (journal != null) {
      try {
        transport.workers().execute(this::drain);
        return;
      } catch (RejectedExecutionException e) {
        // the transport is shutting down: run them here
      }
    }
    drain();
  }

  private void drain() {
    List<Runnable> completions = new ArrayList<>();
    while (true) {
      Effect e;
      while ((e = effects.poll()) != null) {
        try {
          if (e instanceof Effect.Send s && s.batchable()) {
            sendTogether(s);
          } else {
            run(e, completions);
          }
        } catch (RuntimeException ex) {
          LOG.warn("session effect {} failed", e.getClass().getSimpleName(), ex);
        }
      }
      if (!completions.isEmpty()) {
        complete(List.copyOf(completions));
        completions.clear();
      }
      running.set(false);
      if (effects.isEmpty() || !running.compareAndSet(false, true)) {
        return;
      }
    }
  }

  /**
   * Sends {@code first} and the batchable sends on its stream that directly follow it in the queue
   * in one frame, below {@link #MAX_REQUEST_BATCH_BYTES} together. The runner alone polls.
   */
  private void sendTogether(Effect.Send first) {
    List<Effect.Send> run = new ArrayList<>();
    run.add(first);
    long bytes = first.frame().getSerializedSize();
    while (effects.peek() instanceof Effect.Send s
        && s.batchable()
        && s.stream() == first.stream()
        && bytes + s.frame().getSerializedSize() <= MAX_REQUEST_BATCH_BYTES) {
      effects.poll();
      run.add(s);
      bytes += s.frame().getSerializedSize();
    }
    if (run.size() == 1) {
      wire.send(first);
      return;
    }
    RequestBatch.Builder batch = RequestBatch.newBuilder();
    for (Effect.Send s : run) {
      batch.addRequests(s.frame().getRequest());
    }
    wire.send(new Effect.Send(first.stream(), ClientFrame.newBuilder().setRequests(batch).build()));
  }

  /**
   * Completes a batch of calls on the worker pool, as one round: the effects of its callbacks on
   * this session wait until the round ends, then run together ({@link #flush}).
   */
  private void complete(List<Runnable> batch) {
    Runnable round =
        () -> {
          SessionDriver outer = COMPLETING.get();
          COMPLETING.set(this);
          try {
            batch.forEach(Runnable::run);
          } finally {
            if (outer == null) {
              COMPLETING.remove();
            } else {
              COMPLETING.set(outer);
            }
            flush();
          }
        };
    try {
      transport.workers().execute(round);
    } catch (RejectedExecutionException e) {
      // The transport is shut down: complete them here rather than never, on the runner, which
      // holds nothing back (the effects they cause run after them, in this drain).
      batch.forEach(Runnable::run);
    }
  }

  private void run(Effect effect, List<Runnable> completions) {
    if (effect instanceof Effect.Complete c) {
      completions.add(() -> c.call().future().complete(c.frame()));
    } else if (effect instanceof Effect.Fail f) {
      completions.add(() -> f.call().future().completeExceptionally(f.error()));
    } else if (effect instanceof Effect.Send s) {
      wire.send(s);
    } else if (effect instanceof Effect.Register r) {
      wire.register(r);
    } else if (effect instanceof Effect.OpenStream o) {
      wire.openStream(o);
    } else if (effect instanceof Effect.EndStream e) {
      wire.endStream(e.stream(), e.cancel());
    } else if (effect instanceof Effect.Probe p) {
      wire.probe(p);
    } else if (effect instanceof Effect.ReplaceConnection r) {
      transport.replaceIfSilent(r.address(), stallNanos);
    } else if (effect instanceof Effect.Stop) {
      stop();
    } else if (journalEffects != null) {
      journalEffects.run(effect);
    } else {
      throw new IllegalStateException("unknown effect " + effect);
    }
  }

  private void stop() {
    ticking.cancel(false);
    transport.removeOnShutdown(transportClosed);
    if (journal != null) {
      try {
        journal.close();
      } catch (IOException e) {
        LOG.warn("closing the identity journal: {}", e.toString());
      }
    }
    if (ownsTransport) {
      transport.shutdown();
    }
    stopped.countDown();
  }
}
