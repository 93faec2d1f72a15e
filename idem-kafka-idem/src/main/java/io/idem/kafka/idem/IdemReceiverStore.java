package io.idem.kafka.idem;

import io.idem.client.CursorClaim;
import io.idem.client.CursorCommit;
import io.idem.client.CursorStep;
import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.Write;
import io.idem.kafka.RecordKeys;
import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.kafka.spi.ReceiverStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;

/**
 * The receiver's store on an Idem cluster. Each (group, topic, partition) is a cursor in the
 * replicated state, at {@code <prefix><group>/<topic>/<partition>}: a claim raises its epoch, and a
 * batch is one {@code CommitCursor} log command whose steps apply each record's {@link Write}, its
 * key completion and the cursor's advance together, in offset order, under the claim's epoch. A
 * consumer that lost its partition is refused by the state machine ({@code CURSOR_FENCED}).
 *
 * <p>By default ({@link RecordKeys#offsets()}) no key record is kept: the cursor covers every
 * offset below it. With keys taken from the records, each keyed record's key is acquired before the
 * handler runs (all of a batch's at once, pipelined on the session) and completed in its step; a
 * key found completed makes the record a duplicate, whose step only moves the cursor.
 *
 * <p>The client's session makes every command exactly-once, so a commit resent after a lost answer
 * is answered, not applied again; and a commit sent anew after an unknown outcome skips the steps
 * the cursor already passed. Thread-safe; stages complete on the client's worker pool.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
public final class IdemReceiverStore<K, V> implements ReceiverStore<K, V> {
  private static final byte[] NO_FINGERPRINT = new byte[0];

  private final IdemClient client;
  private final IdemRecordHandler<K, V> handler;
  private final RecordKeys<K, V> keys;
  private final String prefix;
  private final @Nullable String keyScope;
  private final Duration keyTimeout;
  private final Duration keyRetention;
  private final int maxSteps;

  private IdemReceiverStore(Builder<K, V> b) {
    this.client = b.client;
    this.handler = b.handler;
    this.keys = b.keys;
    this.prefix = b.prefix;
    this.keyScope = b.keyScope;
    this.keyTimeout = b.keyTimeout;
    this.keyRetention = b.keyRetention;
    this.maxSteps = b.maxSteps;
  }

  /** A builder over {@code client}'s session (the caller keeps and closes the client). */
  public static <K, V> Builder<K, V> builder(IdemClient client, IdemRecordHandler<K, V> handler) {
    return new Builder<>(client, handler);
  }

  /** The cursor's KV key for a group's partition. */
  public String cursorKey(String group, TopicPartition tp) {
    return prefix + group + "/" + tp.topic() + "/" + tp.partition();
  }

  @Override
  public CompletionStage<PartitionClaim> claim(String group, TopicPartition partition) {
    return client
        .claimCursorAsync(cursorKey(group, partition))
        .thenApply((CursorClaim c) -> new PartitionClaim(c.epoch(), c.position()));
  }

  @Override
  public CompletionStage<BatchOutcome> process(
      String group, TopicPartition partition, long epoch, List<ConsumerRecord<K, V>> records) {
    if (records.isEmpty()) {
      throw new IllegalArgumentException("no records");
    }
    String cursor = cursorKey(group, partition);
    String scope = keyScope != null ? keyScope : "kafka/" + group;
    return acquireKeys(records, scope)
        .thenCompose(
            acquired -> {
              Batch b = prepare(records, epoch, acquired, scope);
              return commit(cursor, epoch, b, 0, -1)
                  .whenComplete((outcome, e) -> releaseUnused(b, outcome, scope));
            });
  }

  @Override
  public CompletionStage<BatchOutcome> skip(
      String group, TopicPartition partition, long epoch, ConsumerRecord<K, V> record) {
    return client
        .commitCursorAsync(
            cursorKey(group, partition), epoch, List.of(CursorStep.advance(record.offset() + 1)))
        .thenApply(c -> outcome(c, List.of(record), 0));
  }

  /** What a batch sends: one step per record up to the first that failed, and what it acquired. */
  private final class Batch {
    final List<ConsumerRecord<K, V>> records = new ArrayList<>();
    final List<CursorStep> steps = new ArrayList<>();
    final List<@Nullable String> stepKeys = new ArrayList<>(); // the key a step completes
    final Map<String, Long> tokens = new HashMap<>(); // keys acquired: key -> token
    int duplicates;
    @Nullable ConsumerRecord<K, V> failed;
    @Nullable Throwable cause;
    boolean attempt;
  }

  /** Acquires the batch's keys, each once, all at once: key -> acquisition. */
  private CompletableFuture<Map<String, KeyAcquisition>> acquireKeys(
      List<ConsumerRecord<K, V>> records, String scope) {
    Map<String, CompletableFuture<KeyAcquisition>> pending = new HashMap<>();
    for (ConsumerRecord<K, V> r : records) {
      String key = keys.keyOf(r);
      if (key != null && !pending.containsKey(key)) {
        pending.put(
            key, client.acquireKeyAsync(scope, key, NO_FINGERPRINT, keyTimeout, keyRetention));
      }
    }
    if (pending.isEmpty()) {
      return CompletableFuture.completedFuture(Map.of());
    }
    return CompletableFuture.allOf(pending.values().toArray(CompletableFuture[]::new))
        .thenApply(
            v -> {
              Map<String, KeyAcquisition> out = new HashMap<>();
              pending.forEach((k, f) -> out.put(k, f.join()));
              return out;
            });
  }

  /** Runs the handler on each record in order, up to the first that fails or must wait. */
  private Batch prepare(
      List<ConsumerRecord<K, V>> records,
      long epoch,
      Map<String, KeyAcquisition> acquired,
      String scope) {
    Batch b = new Batch();
    Set<String> applied = new HashSet<>();
    for (ConsumerRecord<K, V> r : records) {
      String key = keys.keyOf(r);
      long token = epoch;
      if (key != null) {
        KeyAcquisition a = Objects.requireNonNull(acquired.get(key));
        if (a instanceof KeyAcquisition.Acquired x && !applied.contains(key)) {
          token = x.token();
          b.tokens.put(key, token);
        } else if (a instanceof KeyAcquisition.Completed || applied.contains(key)) {
          b.records.add(r); // a duplicate: its step only moves the cursor
          b.steps.add(CursorStep.advance(r.offset() + 1));
          b.stepKeys.add(null);
          b.duplicates++;
          continue;
        } else if (a instanceof KeyAcquisition.InProgress) {
          stop(b, r, new IllegalStateException("key " + key + " is in progress elsewhere"), false);
          break;
        } else {
          stop(b, r, new IllegalStateException("key " + key + " answered " + a), true);
          break;
        }
      }
      Write effect;
      try {
        effect = handler.handle(r, token);
      } catch (Exception e) {
        stop(b, r, e, true);
        break;
      }
      CursorStep.Completion completion =
          key == null
              ? null
              : new CursorStep.Completion(
                  scope,
                  key,
                  token,
                  (r.topic() + "/" + r.partition() + "@" + r.offset())
                      .getBytes(StandardCharsets.UTF_8));
      b.records.add(r);
      b.steps.add(new CursorStep(r.offset() + 1, effect, completion));
      b.stepKeys.add(key);
      if (key != null) {
        applied.add(key);
      }
    }
    return b;
  }

  private void stop(Batch b, ConsumerRecord<K, V> r, Throwable cause, boolean attempt) {
    b.failed = r;
    b.cause = cause;
    b.attempt = attempt;
  }

  /**
   * Commits the batch's steps from {@code from} in chunks of at most {@code maxSteps}, one after
   * the other: a chunk is sent only once the one before it committed whole, so a stop never lets a
   * later step past a failed one.
   */
  private CompletableFuture<BatchOutcome> commit(
      String cursor, long epoch, Batch b, int from, long position) {
    if (from >= b.steps.size()) {
      return CompletableFuture.completedFuture(finish(b, position));
    }
    int to = Math.min(b.steps.size(), from + maxSteps);
    return client
        .commitCursorAsync(cursor, epoch, b.steps.subList(from, to))
        .thenCompose(
            c -> {
              if (c instanceof CursorCommit.Committed) {
                return commit(cursor, epoch, b, to, c.position());
              }
              return CompletableFuture.completedFuture(outcome(c, b.records, from));
            });
  }

  /** The outcome once every step committed: the batch's own stop, if it had one. */
  private BatchOutcome finish(Batch b, long position) {
    ConsumerRecord<K, V> failed = b.failed;
    if (failed == null) {
      return new BatchOutcome.Committed(position, b.duplicates);
    }
    return new BatchOutcome.Stopped(
        position, failed.offset(), Objects.requireNonNull(b.cause), b.attempt);
  }

  /** The outcome of a commit that did not commit whole. */
  private BatchOutcome outcome(CursorCommit c, List<ConsumerRecord<K, V>> records, int from) {
    if (c instanceof CursorCommit.Committed) {
      return new BatchOutcome.Committed(c.position(), 0);
    }
    if (c instanceof CursorCommit.Fenced f) {
      return new BatchOutcome.Fenced(f.position(), f.epoch());
    }
    CursorCommit.Stopped s = (CursorCommit.Stopped) c;
    ConsumerRecord<K, V> failed = records.get(from + s.stepsDone());
    Throwable cause =
        s.refusal() != null
            ? s.refusal()
            : new IllegalStateException(
                "the key of "
                    + failed.topic()
                    + "-"
                    + failed.partition()
                    + "@"
                    + failed.offset()
                    + " was taken over (token "
                    + s.keyToken()
                    + ")");
    // A refused write is the record's failure; a key taken over is a wait for its other owner.
    return new BatchOutcome.Stopped(s.position(), failed.offset(), cause, s.refusal() != null);
  }

  /** Releases the keys acquired for records whose steps did not commit. */
  private void releaseUnused(Batch b, @Nullable BatchOutcome outcome, String scope) {
    if (b.tokens.isEmpty()) {
      return;
    }
    long position = outcome == null ? -1 : outcome.position();
    Map<String, Long> unused = new HashMap<>(b.tokens);
    for (int i = 0; i < b.steps.size(); i++) {
      String key = b.stepKeys.get(i);
      if (key != null && b.steps.get(i).position() <= position) {
        unused.remove(key);
      }
    }
    if (outcome == null) {
      return; // unknown: a commit may have landed; the keys expire after keyTimeout if not
    }
    unused.forEach((key, token) -> client.releaseKeyAsync(scope, key, token));
  }

  /** Builds an {@link IdemReceiverStore}. */
  public static final class Builder<K, V> {
    private final IdemClient client;
    private final IdemRecordHandler<K, V> handler;
    private RecordKeys<K, V> keys = RecordKeys.offsets();
    private String prefix = "kafka/";
    private @Nullable String keyScope;
    private Duration keyTimeout = Duration.ofMinutes(5);
    private Duration keyRetention = Duration.ofDays(1);
    private int maxSteps = 1024;

    private Builder(IdemClient client, IdemRecordHandler<K, V> handler) {
      this.client = Objects.requireNonNull(client, "client");
      this.handler = Objects.requireNonNull(handler, "handler");
    }

    /** Which key a record has beyond its offset (default: none, {@link RecordKeys#offsets()}). */
    public Builder<K, V> recordKeys(RecordKeys<K, V> keys) {
      this.keys = Objects.requireNonNull(keys, "keys");
      return this;
    }

    /** The prefix of the cursors' KV keys (default {@code kafka/}); grant it to the principal. */
    public Builder<K, V> cursorPrefix(String prefix) {
      this.prefix = Objects.requireNonNull(prefix, "prefix");
      return this;
    }

    /**
     * The scope of the records' keys (default {@code kafka/<group>}: each consumer group applies a
     * message once, whatever other groups did with it).
     */
    public Builder<K, V> keyScope(String scope) {
      this.keyScope = Objects.requireNonNull(scope, "scope");
      return this;
    }

    /**
     * How long a record's key stays owned before another consumer may take it over (default 5 min).
     * Keep it above the time a batch takes.
     */
    public Builder<K, V> keyTimeout(Duration d) {
      this.keyTimeout = Objects.requireNonNull(d, "keyTimeout");
      return this;
    }

    /** How long a completed key is kept to recognise a duplicate message (default 1 day). */
    public Builder<K, V> keyRetention(Duration d) {
      this.keyRetention = Objects.requireNonNull(d, "keyRetention");
      return this;
    }

    /** The most records in one log command (default 1,024, at most 4,096). */
    public Builder<K, V> maxStepsPerCommit(int n) {
      if (n < 1 || n > 4096) {
        throw new IllegalArgumentException("maxStepsPerCommit must be 1 to 4096, got " + n);
      }
      this.maxSteps = n;
      return this;
    }

    public IdemReceiverStore<K, V> build() {
      return new IdemReceiverStore<>(this);
    }
  }
}
