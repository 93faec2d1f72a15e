package io.idem.server;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.ratis.io.MD5Hash;
import org.apache.ratis.server.protocol.TermIndex;
import org.apache.ratis.server.storage.FileInfo;
import org.apache.ratis.statemachine.impl.SimpleStateMachineStorage;
import org.apache.ratis.statemachine.impl.SingleFileSnapshotInfo;
import org.apache.ratis.util.MD5FileUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Writes the snapshots that {@link IdemStateMachine} freezes on its apply thread: one at a time, on
 * a thread of its own at a lower CPU priority than the threads that commit and answer ({@link
 * BackgroundPriority}), each after waiting for this node's turn ({@link SnapshotStagger}).
 * Atomically: a temporary file renamed into place, with Ratis's MD5 file written first beside it.
 * It keeps what the state machine reports to Ratis: the snapshot written and not reported yet, the
 * last write's failure, and the digest at the last snapshot.
 *
 * <p>Threads: {@link #submit} runs on the apply thread, the write on the writer thread; {@link
 * #awaitWrite} on whichever thread pauses or closes the state machine.
 */
final class SnapshotWriter {
  // The state machine's logger: its snapshot lines keep the name operators filter them by.
  private static final Logger LOG = LoggerFactory.getLogger(IdemStateMachine.class);

  /** How long close and pause wait for a snapshot write under way. */
  private static final Duration WRITER_WAIT = Duration.ofMinutes(2);

  private final SimpleStateMachineStorage storage;
  private final ServerMetrics metrics;

  private final ExecutorService writer =
      Executors.newSingleThreadExecutor(
          r -> {
            Thread t =
                new Thread(
                    () -> {
                      BackgroundPriority.lowerThisThread();
                      r.run();
                    },
                    "idem-snapshot-writer");
            t.setDaemon(true);
            return t;
          });

  /** The write under way or last done; set on the apply thread, awaited by pause and close. */
  private volatile CompletableFuture<Void> writing;

  /** When this node writes a snapshot that every node froze at the same index. */
  private final SnapshotStagger stagger = new SnapshotStagger();

  /** Counted down to end the wait of a write for its turn: pause and close want it now. */
  private volatile CountDownLatch hurry = new CountDownLatch(0);

  /** A snapshot on disk that has not yet been reported to Ratis ({@link #takeWritten}). */
  private final AtomicReference<TermIndex> writtenNotReported = new AtomicReference<>();

  private volatile IdemStateMachine.Digest lastDigest = new IdemStateMachine.Digest(0, "");

  /** Why the last write failed, until {@link #failIfLastWriteFailed} reports it. */
  private volatile Exception lastWriteFailure;

  SnapshotWriter(SimpleStateMachineStorage storage, ServerMetrics metrics) {
    this.storage = storage;
    this.metrics = metrics;
  }

  /** Whether a write is under way (a new snapshot is then not frozen). */
  boolean busy() {
    CompletableFuture<Void> w = writing;
    return w != null && !w.isDone();
  }

  /**
   * Writes {@code frozen} as the snapshot at {@code at} on the writer thread, once this node's turn
   * has come; {@code position} is this node's place in the order of writers ({@link
   * SnapshotStagger#position}), {@code frozenNanos} how long the freeze took on the apply thread.
   */
  void submit(StateSnapshot.Frozen frozen, TermIndex at, long frozenNanos, int position) {
    Duration turn = stagger.delay(position);
    CountDownLatch h = new CountDownLatch(1);
    hurry = h;
    writing =
        CompletableFuture.runAsync(
            () -> {
              long waitStart = System.nanoTime();
              awaitTurn(turn, h);
              write(frozen, at, frozenNanos, Duration.ofNanos(System.nanoTime() - waitStart));
            },
            writer);
  }

  /** The snapshot written since the last call, if any (null otherwise); it is reported once. */
  TermIndex takeWritten() {
    return writtenNotReported.getAndSet(null);
  }

  /**
   * Forgets a snapshot written and not reported: the state machine installed a newer one from the
   * leader (see {@link IdemStateMachine#reinitialize}).
   */
  void forgetWritten() {
    writtenNotReported.set(null);
  }

  /** The digest at the last snapshot written (index 0 if none yet). */
  IdemStateMachine.Digest lastDigest() {
    return lastDigest;
  }

  /** Waits {@code turn} on the writer thread, or less if pause or close count {@code h} down. */
  private static void awaitTurn(Duration turn, CountDownLatch h) {
    if (turn.isZero()) {
      return;
    }
    try {
      h.await(turn.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Writes a frozen state as the snapshot at {@code last}, on the writer thread, after it waited
   * {@code waited} for its turn.
   */
  private void write(
      StateSnapshot.Frozen frozen, TermIndex last, long frozenNanos, Duration waited) {
    long start = System.nanoTime();
    try {
      File file = storage.getSnapshotFile(last.getTerm(), last.getIndex());
      Path tmp = file.toPath().resolveSibling(file.getName() + ".tmp");
      MessageDigest digest = MD5FileUtil.newMD5();
      try (OutputStream out =
          new BufferedOutputStream(
              new DigestOutputStream(Files.newOutputStream(tmp), digest), 1 << 16)) {
        frozen.write(out);
      }
      // After the write, which hashed the key table as it went: digest() does not encode it again.
      lastDigest = new IdemStateMachine.Digest(last.getIndex(), frozen.digest());
      try (FileChannel channel = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
        channel.force(true);
      }
      // The MD5 file first: Ratis's cleanup, on the apply thread, may list the directory at any
      // time, and it must never see a snapshot without its MD5.
      MD5Hash md5 = MD5Hash.newInstance(digest.digest());
      MD5FileUtil.saveMD5File(file, md5);
      Files.move(
          tmp, file.toPath(), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      storage.updateLatestSnapshot(
          new SingleFileSnapshotInfo(new FileInfo(file.toPath(), md5), last));
      writtenNotReported.set(last);
      long took = System.nanoTime() - start;
      stagger.wrote(Duration.ofNanos(took));
      metrics.snapshot(frozenNanos, took, Files.size(file.toPath()));
      LOG.info(
          "snapshot at {} written to {} (state frozen in {} ms on the apply thread, written in {} ms"
              + " after waiting {} ms for its turn)",
          last,
          file,
          TimeUnit.NANOSECONDS.toMillis(frozenNanos),
          TimeUnit.NANOSECONDS.toMillis(took),
          waited.toMillis());
    } catch (IOException | RuntimeException e) {
      lastWriteFailure = e;
      LOG.error("writing the snapshot at {} failed; the log is kept", last, e);
    }
  }

  /**
   * Reports a failed write once, as Ratis expects of takeSnapshot (it logs it and goes on), and
   * clears it so that the next call tries again.
   */
  void failIfLastWriteFailed() throws IOException {
    Exception failure = lastWriteFailure;
    if (failure != null) {
      lastWriteFailure = null;
      throw new IOException("the last snapshot write failed", failure);
    }
  }

  /**
   * Waits for a snapshot write under way, which no longer waits for its turn: before the state is
   * replaced, and on close.
   */
  void awaitWrite() {
    hurry.countDown();
    CompletableFuture<Void> w = writing;
    if (w == null) {
      return;
    }
    try {
      w.get(WRITER_WAIT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (ExecutionException | TimeoutException e) {
      LOG.warn("a snapshot write did not finish in {}", WRITER_WAIT, e);
    }
  }

  /** Waits for a write under way, then stops the writer thread. */
  void close() {
    awaitWrite();
    writer.shutdown();
  }
}
