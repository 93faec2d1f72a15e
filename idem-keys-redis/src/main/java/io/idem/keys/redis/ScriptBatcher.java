package io.idem.keys.redis;

import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;

/**
 * Sends a store's transitions to Redis, many per script call when many are waiting ({@code
 * transitions.lua}). A call goes out at once when no script is in flight on the connection ({@link
 * #IN_FLIGHT}); calls that arrive meanwhile wait, and go together in the next script when it
 * answers (up to the batch limits): a call waits for the script in flight, and for more only when
 * over a batch's worth of calls wait before it. Under light load every call is a script of its own,
 * one round trip as before; under heavy load one script carries many, and Redis pays its per-call
 * costs (the command, the script's set-up, the counter's read and write, reading TIME) once per
 * batch instead of once per transition.
 *
 * <p>Every call of a store names keys of its namespace, which share one hash slot (the hash tag
 * {@code {prefix}}): a batch never spans slots, as Redis Cluster requires of a script.
 *
 * <p>The lock guards only the queue and the count in flight: Lettuce's dispatch and every stage's
 * completion run outside it. A call still waiting when its own stage has already ended (the store's
 * timeout) is dropped, never sent. Thread-safe.
 */
final class ScriptBatcher {

  /**
   * Scripts in flight on the connection before calls start to wait: one. With two or four, small
   * batches went out more often and redis-server, the bottleneck, spent more per transition: 16
   * connections x 4 calls in flight gave 18,300-18,800 keyed operations/s with two or four against
   * 20,000-20,500 with one (docs/PERFORMANCE.md, "Batched scripts").
   */
  static final int IN_FLIGHT = 1;

  /** The most argument bytes in one batch; a single larger call goes alone. */
  static final int MAX_BATCH_BYTES = 1 << 20;

  private static final byte[][] CODES = new byte[128][];
  private static final byte[][] COUNTS = new byte[8][];

  static {
    for (char c : "ACERNSI".toCharArray()) {
      CODES[c] = new byte[] {(byte) c};
    }
    for (int i = 0; i < COUNTS.length; i++) {
      COUNTS[i] = Integer.toString(i).getBytes(StandardCharsets.US_ASCII);
    }
  }

  /**
   * One transition: its code in {@code transitions.lua} ('A', 'C', 'E', 'R', 'N' or 'S'), its keys
   * and arguments, and the stage its reply completes.
   */
  static final class Call {
    final char code;
    final byte[][] keys;
    final byte[][] args;
    final CompletableFuture<List<Object>> reply = new CompletableFuture<>();
    final int bytes;

    Call(char code, byte[][] keys, byte[]... args) {
      this.code = code;
      this.keys = keys;
      this.args = args;
      int b = 0;
      for (byte[] k : keys) {
        b += k.length;
      }
      for (byte[] a : args) {
        b += a.length;
      }
      this.bytes = b;
    }

    /** The same transition (same keys and arguments), to send again: a fresh reply. */
    Call again() {
      return new Call(code, keys, args);
    }
  }

  /** A batch as the script takes it. */
  record Encoded(byte[][] keys, byte[][] args) {}

  /**
   * What runs after each script and before its calls are answered: the store's WAIT for replicas
   * ({@link RedisKeyStore.Builder#waitForReplicas}). Its stage fails if the script's writes are not
   * known to be on enough replicas; every call of the script then fails with it.
   */
  interface AfterScript {
    /** Whether the script must answer the id of the node that ran it (Redis Cluster). */
    boolean identify();

    /**
     * Waits for the replicas of the node that ran the script.
     *
     * @param nodeId that node's id, if {@link #identify()}; else null
     */
    CompletableFuture<Void> await(byte @Nullable [] nodeId);
  }

  private final RedisScriptingAsyncCommands<byte[], byte[]> redis;
  private final byte[] counterKey;
  private final int maxBatch;
  private final int maxInFlight;
  private final long timeoutNanos;
  private final @Nullable AfterScript after;

  private final Object lock = new Object();
  private final ArrayDeque<Call> waiting = new ArrayDeque<>(); // guarded by lock
  private int inFlight; // guarded by lock
  private boolean closed; // guarded by lock

  private final LongAdder scripts = new LongAdder();
  private final LongAdder sent = new LongAdder();

  /**
   * @param maxBatch the most transitions in one script; 1: every call is a script of its own, sent
   *     at once, with no limit on those in flight
   * @param timeoutNanos how long a script may take before its calls fail (each call's stage has its
   *     own timeout too; this one frees the script's place in flight)
   * @param after what runs after each script before its calls are answered; null: nothing
   */
  ScriptBatcher(
      RedisScriptingAsyncCommands<byte[], byte[]> redis,
      byte[] counterKey,
      int maxBatch,
      long timeoutNanos,
      @Nullable AfterScript after) {
    this.redis = redis;
    this.after = after;
    this.counterKey = counterKey;
    this.maxBatch = maxBatch;
    this.maxInFlight = maxBatch == 1 ? Integer.MAX_VALUE : IN_FLIGHT;
    this.timeoutNanos = timeoutNanos;
  }

  /** Queues {@code call}, or sends it at once; returns its reply's stage. */
  CompletableFuture<List<Object>> submit(Call call) {
    List<Call> batch = null;
    synchronized (lock) {
      if (closed) {
        call.reply.completeExceptionally(new IllegalStateException("the store is closed"));
        return call.reply;
      }
      waiting.add(call);
      if (inFlight < maxInFlight) {
        batch = take();
        if (batch != null) {
          inFlight++;
        }
      }
    }
    if (batch != null) {
      send(batch);
    }
    return call.reply;
  }

  /**
   * Fails every call still waiting, and every later one. Scripts in flight answer their calls as
   * Lettuce settles them (the connection's close fails them).
   */
  void close() {
    List<Call> dropped;
    synchronized (lock) {
      closed = true;
      dropped = new ArrayList<>(waiting);
      waiting.clear();
    }
    for (Call c : dropped) {
      c.reply.completeExceptionally(new IllegalStateException("the store was closed"));
    }
  }

  /** Scripts sent so far. */
  long scriptsSent() {
    return scripts.sum();
  }

  /** Transitions sent so far, in those scripts. */
  long transitionsSent() {
    return sent.sum();
  }

  /** The next batch from the queue, or null if no live call waits. Under the lock. */
  private @Nullable List<Call> take() {
    List<Call> batch = null;
    int bytes = 0;
    while (!waiting.isEmpty()) {
      Call next = waiting.peek();
      if (next.reply.isDone()) { // timed out while it waited: never sent
        waiting.poll();
        continue;
      }
      if (batch != null && (batch.size() == maxBatch || bytes + next.bytes > MAX_BATCH_BYTES)) {
        break;
      }
      waiting.poll();
      if (batch == null) {
        batch = new ArrayList<>(Math.min(maxBatch, waiting.size() + 1));
      }
      batch.add(next);
      bytes += next.bytes;
    }
    return batch;
  }

  /**
   * Sends {@code batch}, and the batches after it whose scripts fail at once (a closed or rejecting
   * connection), in a loop rather than by recursion.
   */
  private void send(List<Call> batch) {
    while (batch != null) {
      List<Call> current = batch;
      scripts.increment();
      sent.add(current.size());
      CompletableFuture<List<Object>> script;
      try {
        boolean identify = after != null && after.identify();
        Encoded e = encode(counterKey, current, identify);
        script = KeyScript.TRANSITIONS.run(redis, e.keys(), e.args());
        if (after != null) {
          script = script.thenCompose(reply -> afterScript(after, identify, reply));
        }
      } catch (Throwable failure) { // whatever it is, the place in flight must be given back
        script = CompletableFuture.failedFuture(failure);
      }
      if (script.isDone()) {
        batch = finished();
        script.whenComplete((reply, failure) -> answer(current, reply, failure));
        continue;
      }
      script
          .orTimeout(timeoutNanos, TimeUnit.NANOSECONDS)
          .whenComplete(
              (reply, failure) -> {
                List<Call> next = finished();
                try {
                  if (next != null) {
                    send(next); // keep the connection busy before answering this batch's callers
                  }
                } finally {
                  answer(current, reply, failure);
                }
              });
      return;
    }
  }

  /**
   * Runs {@code after} on the script's {@code reply}: the reply without the node's id, once {@code
   * after} has succeeded.
   */
  private static CompletableFuture<List<Object>> afterScript(
      AfterScript after, boolean identify, List<Object> reply) {
    byte[] nodeId = null;
    List<Object> calls = reply;
    if (identify) {
      if (reply == null || reply.isEmpty() || !(reply.get(reply.size() - 1) instanceof byte[] id)) {
        return CompletableFuture.failedFuture(
            new IllegalStateException("the script did not answer its node's id: " + reply));
      }
      nodeId = id;
      calls = reply.subList(0, reply.size() - 1);
    }
    List<Object> answer = calls;
    return after.await(nodeId).thenApply(v -> answer);
  }

  /** A script has answered: its place in flight goes to the next batch, if one waits. */
  private @Nullable List<Call> finished() {
    synchronized (lock) {
      inFlight--;
      List<Call> next = closed ? null : take();
      if (next != null) {
        inFlight++;
      }
      return next;
    }
  }

  private static void answer(List<Call> batch, List<Object> reply, Throwable failure) {
    if (failure == null && (reply == null || reply.size() != batch.size())) {
      failure =
          new IllegalStateException(
              "the batch script answered "
                  + (reply == null ? "nothing" : reply.size() + " replies")
                  + " for "
                  + batch.size()
                  + " transitions");
    }
    for (int i = 0; i < batch.size(); i++) {
      Call c = batch.get(i);
      if (failure != null) {
        c.reply.completeExceptionally(failure);
        continue;
      }
      Object one = reply.get(i);
      if (!(one instanceof List<?> list)) {
        c.reply.completeExceptionally(
            new IllegalStateException("unexpected reply in a batch: " + one));
        continue;
      }
      @SuppressWarnings("unchecked")
      List<Object> r = (List<Object>) list;
      if (r.size() == 2 && r.get(0) instanceof byte[] tag && tag.length == 1 && tag[0] == 'X') {
        Object error = r.get(1);
        c.reply.completeExceptionally(
            new RedisCommandExecutionException(
                error instanceof byte[] text
                    ? new String(text, StandardCharsets.UTF_8)
                    : String.valueOf(error)));
        continue;
      }
      c.reply.complete(r);
    }
  }

  /** The script's KEYS and ARGV for {@code batch}, in the layout {@code transitions.lua} reads. */
  static Encoded encode(byte[] counterKey, List<Call> batch) {
    return encode(counterKey, batch, false);
  }

  /**
   * As {@link #encode(byte[], List)}; with {@code identify}, the script also answers, last, the id
   * of the node that ran it.
   */
  static Encoded encode(byte[] counterKey, List<Call> batch, boolean identify) {
    int keys = 1;
    int args = identify ? 2 : 0;
    for (Call c : batch) {
      keys += c.keys.length;
      args += 2 + c.args.length;
    }
    byte[][] k = new byte[keys][];
    byte[][] a = new byte[args][];
    k[0] = counterKey;
    int ki = 1;
    int ai = 0;
    for (Call c : batch) {
      for (byte[] key : c.keys) {
        k[ki++] = key;
      }
      a[ai++] = CODES[c.code];
      a[ai++] = COUNTS[c.args.length];
      for (byte[] arg : c.args) {
        a[ai++] = arg;
      }
    }
    if (identify) {
      a[ai++] = CODES['I'];
      a[ai] = COUNTS[0];
    }
    return new Encoded(k, a);
  }
}
