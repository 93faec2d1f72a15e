package io.idem.server;

import io.idem.proto.ServerFrame;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * The answers one session stream owes its client, and whether the stream may read another request.
 *
 * <p>An answer is owed from the moment its command goes to the {@link Batcher} ({@link #submitted})
 * until its frame is written to the transport ({@link #sent}). In between it is in flight (no
 * answer yet), kept (an answer of the open {@link AnswerRound}, to leave in one batch frame), or
 * waiting (a frame the transport was not ready for). The stream reads the next request only while
 * {@link #mayRead}: fewer than {@link Bounds#maxOwedAnswers} owed and fewer than {@link
 * Bounds#maxOwedBytes} owed bytes. An answer still in flight has no size yet; it counts as large as
 * the largest answer this stream has had, so a stream whose answers are large has fewer of them in
 * flight. A client that does not read then stops being read, and HTTP/2 flow control holds its
 * further requests on its own side.
 *
 * <p>An answer's size is known only once it comes, so a stream also starts slowly: it may have
 * {@link #INITIAL_IN_FLIGHT} commands in flight, and one more for each answer the transport has
 * taken, up to the count bound. A client that reads its answers reaches its full window within a
 * few round trips; one that reads none stays near the start, so that the answers of its first burst
 * (a resend of a request whose saved answer is large, many times over) cannot outgrow the bytes
 * bound by more than that many answers.
 *
 * <p>A stream whose frames wait while nothing leaves is stalled ({@link #stalledNanos}); the stream
 * ends itself once that lasts {@link Bounds#stallTimeoutMs}.
 *
 * <p>Not thread-safe: the stream guards it with its lock. Time comes in as arguments.
 */
final class Outbox {
  /**
   * The bounds of one stream.
   *
   * @param maxOwedAnswers the most answers a stream may owe (in flight, kept or waiting) and still
   *     read another request; at the bound it reads none until answers leave. At least the largest
   *     session window, so that a client that keeps its window full is never held back.
   * @param maxOwedBytes the most bytes of owed answers (waiting and kept ones by their size, those
   *     in flight as large as the stream's largest answer) with which a stream still reads another
   *     request; at the bound it reads none until answers leave
   * @param stallTimeoutMs how long frames may wait with none leaving before the stream is ended
   *     with {@code RESOURCE_EXHAUSTED}
   */
  record Bounds(int maxOwedAnswers, long maxOwedBytes, long stallTimeoutMs) {
    /** Validates the bounds, naming the first bad one. */
    Bounds {
      if (maxOwedAnswers < FrontDoor.MAX_REQUESTS_PER_BATCH) {
        throw new IllegalArgumentException(
            "streamMaxOwedAnswers must be at least "
                + FrontDoor.MAX_REQUESTS_PER_BATCH
                + " (the largest session window), got "
                + maxOwedAnswers);
      }
      if (maxOwedBytes < FrontDoor.MAX_BATCH_BYTES) {
        throw new IllegalArgumentException(
            "streamMaxOwedBytes must be at least "
                + FrontDoor.MAX_BATCH_BYTES
                + " (one batch of answers), got "
                + maxOwedBytes);
      }
      if (stallTimeoutMs < 1) {
        throw new IllegalArgumentException(
            "streamStallTimeoutMs must be positive, got " + stallTimeoutMs);
      }
    }
  }

  /**
   * Commands a stream may have in flight before the transport has taken any of its answers: the
   * default session window, so that a default client is never held back.
   */
  static final int INITIAL_IN_FLIGHT = io.idem.core.SessionTableConfig.DEFAULT_WINDOW;

  /** A frame the transport has not taken yet, with the owed answers it carries and their size. */
  private record Waiting(ServerFrame frame, int answers, long bytes) {}

  private final Bounds bounds;
  private final int maxBatchBytes;
  private final ArrayDeque<Waiting> waiting = new ArrayDeque<>();
  private final List<ServerFrame> kept = new ArrayList<>();
  private long keptBytes;
  private int inFlight;
  private int queuedAnswers;
  private long queuedBytes;
  private int largestAnswer;
  private long lastProgressNanos;
  private int allowance = INITIAL_IN_FLIGHT; // commands it may have in flight

  /**
   * @param maxBatchBytes kept answers leave in one frame of about this size at most
   */
  Outbox(Bounds bounds, int maxBatchBytes) {
    this.bounds = bounds;
    this.maxBatchBytes = maxBatchBytes;
  }

  /** {@code n} commands went to the batcher: their answers are owed. */
  void submitted(int n) {
    inFlight += n;
  }

  /**
   * The answer to one submitted command: kept for the round's batch frame if {@code keep}, else
   * queued at once (after anything kept, so the stream's order stays the order of its answers).
   */
  void answered(ServerFrame answer, boolean keep, long nowNanos) {
    inFlight--;
    int size = answer.getSerializedSize();
    largestAnswer = Math.max(largestAnswer, size);
    queuedAnswers++;
    queuedBytes += size;
    if (keep) {
      if (!kept.isEmpty() && keptBytes + size > maxBatchBytes) {
        seal(nowNanos);
      }
      kept.add(answer);
      keptBytes += size;
    } else {
      seal(nowNanos);
      enqueue(new Waiting(answer, 1, size), nowNanos);
    }
  }

  /** The answer to one submitted command will never be sent (the stream is over). */
  void dropped() {
    inFlight--;
  }

  /** Queues a frame of the stream's own (a refusal, the batch capability), owing no answer. */
  void frame(ServerFrame f, long nowNanos) {
    seal(nowNanos);
    int size = f.getSerializedSize();
    queuedBytes += size;
    enqueue(new Waiting(f, 0, size), nowNanos);
  }

  /** Queues the kept answers as one frame, a batch if there are several. */
  void seal(long nowNanos) {
    if (kept.isEmpty()) {
      return;
    }
    ServerFrame f =
        kept.size() == 1 ? kept.get(0) : ServerFrame.newBuilder().addAllBatch(kept).build();
    enqueue(new Waiting(f, kept.size(), keptBytes), nowNanos);
    kept.clear();
    keptBytes = 0;
  }

  private void enqueue(Waiting w, long nowNanos) {
    if (waiting.isEmpty()) {
      lastProgressNanos = nowNanos; // a stall starts when a frame waits, not at the last send
    }
    waiting.add(w);
  }

  /** Whether answers are kept for the open round. */
  boolean keeping() {
    return !kept.isEmpty();
  }

  /** The next frame to write, or null if none waits. */
  ServerFrame next() {
    Waiting w = waiting.peek();
    return w == null ? null : w.frame();
  }

  /** The frame {@link #next} returned was written (or could not be: the stream is over). */
  void sent(long nowNanos) {
    Waiting w = waiting.poll();
    if (w == null) {
      throw new IllegalStateException("no frame was waiting");
    }
    queuedAnswers -= w.answers();
    queuedBytes -= w.bytes();
    lastProgressNanos = nowNanos;
    allowance = (int) Math.min(bounds.maxOwedAnswers(), (long) allowance + w.answers());
  }

  /**
   * Forgets every kept and waiting frame (the stream is over; the answers stay saved in the
   * session, and the client gets them by resending). Answers in flight stay owed until {@link
   * #dropped}. Returns how many owed answers were forgotten.
   */
  int clear() {
    int forgotten = queuedAnswers;
    waiting.clear();
    kept.clear();
    keptBytes = 0;
    queuedAnswers = 0;
    queuedBytes = 0;
    return forgotten;
  }

  /** Commands submitted whose answers have not come. */
  int inFlight() {
    return inFlight;
  }

  /** Answers owed: in flight, kept or waiting. */
  int owedAnswers() {
    return inFlight + queuedAnswers;
  }

  /**
   * Bytes owed: kept and waiting frames by their size, answers in flight as large as the largest
   * answer this stream has had.
   */
  long owedBytes() {
    return queuedBytes + (long) inFlight * largestAnswer;
  }

  /**
   * Whether the stream may read another request: both bounds have room, and fewer commands are in
   * flight than the answers taken so far allow.
   */
  boolean mayRead() {
    return inFlight < allowance
        && owedAnswers() < bounds.maxOwedAnswers()
        && owedBytes() < bounds.maxOwedBytes();
  }

  /** Whether a frame waits for the transport. */
  boolean hasWaiting() {
    return !waiting.isEmpty();
  }

  /**
   * How long frames have waited with none leaving: since the last frame left, or since the first
   * one queued after the outbox was empty. 0 while none waits.
   */
  long stalledNanos(long nowNanos) {
    return waiting.isEmpty() ? 0 : nowNanos - lastProgressNanos;
  }

  /** Whether the stream has been stalled for its bound by {@code nowNanos}. */
  boolean stalled(long nowNanos) {
    return stalledNanos(nowNanos)
        >= java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(bounds.stallTimeoutMs());
  }

  /** The bounds. */
  Bounds bounds() {
    return bounds;
  }
}
