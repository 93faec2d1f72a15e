package io.idem.server;

import io.idem.proto.Command;
import io.idem.proto.CommandResult;
import io.idem.proto.EntryResult;
import io.idem.proto.LogEntry;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Group commit on the leader: folds the commands of all sessions into few log entries. While {@code
 * maxInFlight} entries are being replicated, new commands accumulate and leave together in the next
 * entry. Every entry is stamped with the leader's wall clock as it is (replicas keep the highest
 * stamp, so log time never goes backwards; a stamp is never carried ahead of the clock, which the
 * state machine's check of proposals would refuse). When nothing was appended for a tick interval,
 * an empty entry (a tick) is appended so that sessions and leases expire on an idle cluster too.
 *
 * <p>While the state applied on this node has no replicated configuration, every entry starts with
 * the bootstrap {@code ConfigureCmd} of this node's flags; the state machine applies the first one
 * and ignores the others (first wins), so leaders that race at bootstrap still agree.
 *
 * <p>Thread-safe. One daemon thread builds and appends entries; another hands out the outcomes, so
 * that the state machine's apply thread (which completes an entry) never waits on network writes to
 * clients.
 */
final class Batcher implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Batcher.class);

  /**
   * Bounds of the batcher.
   *
   * @param maxCommands most commands in one entry
   * @param maxBytes most bytes of commands in one entry (a larger command goes alone)
   * @param maxInFlight entries being replicated at once; commands arriving meanwhile queue
   * @param maxQueued most commands queued; at the bound, a new one fails at once with {@link
   *     OverloadedException} (the client backs off and resends)
   * @param maxQueuedBytes most bytes of queued commands; at the bound, a new one fails with {@link
   *     OverloadedException}, unless the queue is empty (a command of any size then queues, so that
   *     none is refused for its size alone)
   * @param tickIntervalMs how long the leader stays without appending before it appends a tick
   */
  record Settings(
      int maxCommands,
      int maxBytes,
      int maxInFlight,
      int maxQueued,
      long maxQueuedBytes,
      long tickIntervalMs) {}

  /** A command waiting for its entry. */
  private record Pending(Command command, int size, CompletableFuture<CommandResult> result) {}

  /** The commands of one entry, and the read barriers that wait for it. */
  private record Batch(List<Pending> commands, List<CompletableFuture<Void>> barriers) {}

  /** Thrown into a command's future when the queue is full. */
  static final class OverloadedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    OverloadedException(int queued, long bytes) {
      super(
          "the leader has "
              + queued
              + " commands ("
              + bytes
              + " bytes) queued; back off and retry");
    }
  }

  private final ReplicatedLog log;
  private final Settings settings;
  private final LongSupplier wallClock;
  private final java.util.function.IntSupplier format;
  private final Supplier<Command> bootstrap;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition changed = lock.newCondition();
  private final ArrayDeque<Pending> queue = new ArrayDeque<>();
  private long queuedBytes; // of the commands in queue; guarded by lock
  private List<CompletableFuture<Void>> barriers = new ArrayList<>();
  private final Thread thread;
  private final java.util.concurrent.ExecutorService replies;
  private int inFlight;
  private long lastAppendNanos = System.nanoTime();
  private volatile boolean closed;
  private final java.util.concurrent.atomic.AtomicLong entries =
      new java.util.concurrent.atomic.AtomicLong();
  private final java.util.concurrent.atomic.AtomicLong commands =
      new java.util.concurrent.atomic.AtomicLong();

  /**
   * @param bootstrap the configuration command to put first in the next entry, or null when none is
   *     needed; called under the batcher's lock, so it must not block
   */
  Batcher(
      ReplicatedLog log,
      Settings settings,
      LongSupplier wallClock,
      Supplier<Command> bootstrap,
      String name) {
    this(log, settings, wallClock, bootstrap, () -> ReplicatedState.LOG_FORMAT_VERSION, name);
  }

  /**
   * @param format the log format to write each entry in: the format in force ({@link
   *     IdemStateMachine#writeFormat})
   */
  Batcher(
      ReplicatedLog log,
      Settings settings,
      LongSupplier wallClock,
      Supplier<Command> bootstrap,
      java.util.function.IntSupplier format,
      String name) {
    this.format = format;
    this.log = log;
    this.settings = settings;
    this.wallClock = wallClock;
    this.bootstrap = bootstrap;
    this.thread = new Thread(this::run, name);
    thread.setDaemon(true);
    this.replies =
        java.util.concurrent.Executors.newSingleThreadExecutor(
            r -> {
              Thread t = new Thread(r, name + "-replies");
              t.setDaemon(true);
              return t;
            });
    thread.start();
  }

  /** Queues {@code command} for the next entry; completes with its outcome once applied. */
  CompletableFuture<CommandResult> submit(Command command) {
    return submitAll(List.of(command)).get(0);
  }

  /**
   * Queues {@code commands} in their order, under one acquisition of the lock (a batch of requests
   * from one frame); each gets its own future, as from {@link #submit}.
   */
  List<CompletableFuture<CommandResult>> submitAll(List<Command> commands) {
    List<CompletableFuture<CommandResult>> futures = new ArrayList<>(commands.size());
    for (int i = 0; i < commands.size(); i++) {
      futures.add(new CompletableFuture<>());
    }
    int queued = 0;
    RuntimeException refused = null;
    lock.lock();
    try {
      for (; queued < commands.size(); queued++) {
        if (closed) {
          refused = new ReplicatedLog.NotLeaderException("");
          break;
        }
        Command command = commands.get(queued);
        int size = command.getSerializedSize();
        if (queue.size() >= settings.maxQueued()
            || (!queue.isEmpty() && queuedBytes + size > settings.maxQueuedBytes())) {
          refused = new OverloadedException(queue.size(), queuedBytes);
          break;
        }
        queue.add(new Pending(command, size, futures.get(queued)));
        queuedBytes += size;
      }
      if (queued > 0) {
        changed.signal();
      }
    } finally {
      lock.unlock();
    }
    // The rest share one exception, and fail outside the lock (they have no callbacks yet anyway).
    for (int i = queued; i < commands.size(); i++) {
      futures.get(i).completeExceptionally(refused);
    }
    return futures;
  }

  /**
   * A read barrier: completes once an entry that this batcher appended after the call has been
   * committed and applied on this node (the next entry, with whatever commands it carries, or an
   * empty one if none come), and fails as that entry does (not the leader any more, for one).
   *
   * <p>A linearizable read waits for it before it reads: the entry's commit means that, after the
   * read arrived, a majority accepted an entry of this leader's term, so no other leader had
   * committed anything by then, and the state applied here includes every write acknowledged before
   * the read. Ratis's ReadIndex alone does not ensure this (see docs/VERIFICATION.md, "Reads under
   * partitions").
   */
  CompletableFuture<Void> barrier() {
    CompletableFuture<Void> f = new CompletableFuture<>();
    lock.lock();
    try {
      if (closed) {
        f.completeExceptionally(new ReplicatedLog.NotLeaderException(""));
      } else {
        barriers.add(f);
        changed.signal();
      }
    } finally {
      lock.unlock();
    }
    return f;
  }

  private void run() {
    while (!closed) {
      Batch batch;
      lock.lock();
      try {
        if (!awaitWork()) {
          continue;
        }
        batch = drain();
        inFlight++;
      } catch (InterruptedException e) {
        return;
      } finally {
        lock.unlock();
      }
      append(batch);
    }
  }

  /** Waits until an entry should go out: commands queued or a tick due, and room in flight. */
  private boolean awaitWork() throws InterruptedException {
    long tickNanos = TimeUnit.MILLISECONDS.toNanos(settings.tickIntervalMs());
    while (!closed) {
      boolean room = inFlight < settings.maxInFlight();
      long idle = System.nanoTime() - lastAppendNanos;
      if (room && (!queue.isEmpty() || !barriers.isEmpty())) {
        return true;
      }
      boolean leader = log.isLeader();
      if (room && idle >= tickNanos && leader) {
        return true;
      }
      // A follower has no ticks to write: it sleeps a whole interval rather than waking each
      // millisecond (commands submitted meanwhile signal it).
      changed.awaitNanos(
          leader ? Math.max(TimeUnit.MILLISECONDS.toNanos(1), tickNanos - idle) : tickNanos);
    }
    return false;
  }

  private Batch drain() {
    List<Pending> batch = new ArrayList<>();
    int bytes = 0;
    Command boot = bootstrap.get();
    if (boot != null) {
      CompletableFuture<CommandResult> outcome = new CompletableFuture<>();
      outcome.whenComplete(Batcher::bootstrapped);
      batch.add(new Pending(boot, 0, outcome));
    }
    while (!queue.isEmpty() && batch.size() < settings.maxCommands()) {
      Pending p = queue.peek();
      if (bytes > 0 && bytes + p.size() > settings.maxBytes()) {
        break;
      }
      batch.add(queue.poll());
      bytes += p.size();
      queuedBytes -= p.size();
    }
    List<CompletableFuture<Void>> waiting = barriers;
    barriers = new ArrayList<>();
    return new Batch(batch, waiting);
  }

  private void append(Batch next) {
    List<Pending> batch = next.commands();
    long stamp = wallClock.getAsLong();
    lastAppendNanos = System.nanoTime();
    LogEntry.Builder entry =
        LogEntry.newBuilder().setFormatVersion(format.getAsInt()).setLeaderTimeMs(stamp);
    for (Pending p : batch) {
      entry.addCommands(p.command());
    }
    entries.incrementAndGet();
    commands.addAndGet(batch.size());
    CompletableFuture<EntryResult> appended;
    try {
      appended = log.append(entry.build());
    } catch (RuntimeException e) {
      appended = CompletableFuture.failedFuture(e);
    }
    appended.whenCompleteAsync((result, error) -> finish(next, result, error), this::reply);
  }

  private void finish(Batch next, EntryResult result, Throwable error) {
    List<Pending> batch = next.commands();
    lock.lock();
    try {
      inFlight--;
      changed.signal();
    } finally {
      lock.unlock();
    }
    if (error == null && result.getResultsCount() != batch.size()) {
      error =
          new IllegalStateException(
              "entry answered " + result.getResultsCount() + " of " + batch.size() + " commands");
    }
    if (error != null) {
      LOG.debug("entry of {} commands failed: {}", batch.size(), error.toString());
      for (Pending p : batch) {
        p.result().completeExceptionally(error);
      }
      for (CompletableFuture<Void> b : next.barriers()) {
        b.completeExceptionally(error);
      }
      return;
    }
    // The commands' answers leave together: a stream that takes batches sends its answers of this
    // entry in one frame when the round closes.
    AnswerRound round = AnswerRound.open();
    try {
      for (int i = 0; i < batch.size(); i++) {
        batch.get(i).result().complete(result.getResults(i));
      }
    } finally {
      round.close();
    }
    for (CompletableFuture<Void> b : next.barriers()) {
      b.complete(null);
    }
  }

  private static void bootstrapped(CommandResult result, Throwable error) {
    if (error != null) {
      LOG.debug("bootstrap configuration not applied ({}); the next entry carries it", error);
    } else if (result.getConfigured().getCode() != io.idem.proto.Code.OK) {
      LOG.error("bootstrap configuration refused: {}", result.getConfigured().getMessage());
    }
  }

  /** Hands outcomes to the replies thread; once closed, on the completing thread itself. */
  private void reply(Runnable r) {
    try {
      replies.execute(r);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      r.run(); // after close: the waiting commands still get their (not-leader) outcome
    }
  }

  /** Entries this batcher appended (ticks included). */
  long entriesAppended() {
    return entries.get();
  }

  /** Commands in those entries. */
  long commandsAppended() {
    return commands.get();
  }

  /** Fails queued commands as not-leader and stops the thread. */
  @Override
  public void close() {
    List<Pending> left;
    List<CompletableFuture<Void>> waiting;
    lock.lock();
    try {
      closed = true;
      left = new ArrayList<>(queue);
      queue.clear();
      queuedBytes = 0;
      waiting = barriers;
      barriers = new ArrayList<>();
      changed.signalAll();
    } finally {
      lock.unlock();
    }
    for (Pending p : left) {
      p.result().completeExceptionally(new ReplicatedLog.NotLeaderException(""));
    }
    for (CompletableFuture<Void> b : waiting) {
      b.completeExceptionally(new ReplicatedLog.NotLeaderException(""));
    }
    thread.interrupt();
    replies.shutdown(); // outcomes already handed over still go out
  }
}
