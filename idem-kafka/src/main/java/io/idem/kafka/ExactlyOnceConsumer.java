package io.idem.kafka;

import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.kafka.spi.ReceiverStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;

/**
 * The Idempotent Receiver on a plain {@link KafkaConsumer}: each record's effect lands once, with
 * the partition's offset, in one atomic step of a {@link ReceiverStore}.
 *
 * <ul>
 *   <li>On assignment, it claims each partition in the store, which fences the partition's earlier
 *       owners there, and seeks to the offset the store holds (not Kafka's committed one).
 *   <li>Each poll's records go to the store per partition; the store runs the handler and commits
 *       effects and offset together. Partitions are processed concurrently, each in offset order.
 *   <li>A record that failed stops its partition's batch there; it is retried with a backoff, and
 *       after {@code maxAttempts} failures published to the dead letters and skipped.
 *   <li>After progress, Kafka's committed offsets are advanced too, for lag monitoring only.
 *   <li>A consumer that lost its partition (a rebalance, a pause past {@code max.poll.interval.ms})
 *       and commits late is refused by the store; it pauses the partition until Kafka revokes it,
 *       and claims it again if Kafka still assigns it {@code maxBackoff} later.
 * </ul>
 *
 * <p>One thread runs the loop ({@link #run}, or {@link #start}); {@link #close} from any thread
 * stops it. The consumer is created here from the given configuration, with {@code
 * enable.auto.commit} false.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
public final class ExactlyOnceConsumer<K, V> implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger(ExactlyOnceConsumer.class.getName());

  private final Consumer<K, V> consumer;
  private final ReceiverStore<K, V> store;
  private final String group;
  private final List<String> topics;
  private final int maxAttempts;
  private final @Nullable DeadLetters<K, V> deadLetters;
  private final Duration pollTimeout;
  private final Duration storeTimeout;
  private final Duration maxBackoff;
  private final AtomicBoolean closed = new AtomicBoolean();
  private final ReceiverStats stats = new ReceiverStats();
  private @Nullable Thread thread;
  private boolean ran; // guarded by this: run() began, or close() came first

  /** The partitions this consumer owns in the store: their claim and where they stand. */
  private final Map<TopicPartition, Owned> owned = new HashMap<>();

  /** Partitions assigned by Kafka whose claim in the store has not succeeded yet. */
  private final Map<TopicPartition, Long> unclaimed = new LinkedHashMap<>();

  private static final class Owned {
    final long epoch;
    long position; // the next offset to consume as the store holds it; -1 if unknown
    long committedToKafka = -1;
    long failedOffset = -1;
    int failures;
    long pausedUntilNanos;

    Owned(long epoch, long position) {
      this.epoch = epoch;
      this.position = position;
    }
  }

  private ExactlyOnceConsumer(Builder<K, V> b, Consumer<K, V> consumer) {
    this.consumer = consumer;
    this.store = b.store;
    this.group = b.group;
    this.topics = List.copyOf(b.topics);
    this.maxAttempts = b.maxAttempts;
    this.deadLetters = b.deadLetters;
    this.pollTimeout = b.pollTimeout;
    this.storeTimeout = b.storeTimeout;
    this.maxBackoff = b.maxBackoff;
  }

  /**
   * A builder over a consumer configuration ({@code bootstrap.servers}, {@code group.id} and any
   * other {@link ConsumerConfig}) and the store, whose handler runs once per record.
   */
  public static <K, V> Builder<K, V> builder(
      Map<String, Object> consumerConfig,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      ReceiverStore<K, V> store) {
    return new Builder<>(consumerConfig, keyDeserializer, valueDeserializer, store);
  }

  /** What the consumer has done so far; safe to read from any thread. */
  public ReceiverStats stats() {
    return stats;
  }

  /** Runs the loop on a new thread named after the group, and returns. */
  public synchronized void start() {
    if (thread != null) {
      throw new IllegalStateException("already started");
    }
    Thread t = new Thread(this::run, "idem-kafka-" + group);
    t.setDaemon(true);
    thread = t;
    t.start();
  }

  /** Runs the loop on the calling thread until {@link #close}; once. */
  public void run() {
    synchronized (this) {
      if (ran) {
        if (closed.get()) {
          return; // closed before it ran: the Kafka consumer is closed already
        }
        throw new IllegalStateException("the loop runs once");
      }
      ran = true;
    }
    try {
      consumer.subscribe(topics, new Rebalance());
      while (!closed.get()) {
        claimPending();
        resumeDue();
        ConsumerRecords<K, V> records = consumer.poll(pollTimeout);
        if (!records.isEmpty()) {
          processAll(records);
        }
        commitToKafka();
      }
    } catch (WakeupException e) {
      if (!closed.get()) {
        throw e;
      }
    } finally {
      try {
        consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
      } catch (RuntimeException e) {
        LOG.log(System.Logger.Level.WARNING, "closing the Kafka consumer failed", e);
      }
    }
  }

  /**
   * Stops the loop (it closes the Kafka consumer) and waits for its thread, if it started one;
   * closes the Kafka consumer itself if the loop never ran.
   */
  @Override
  public void close() {
    boolean neverRan;
    synchronized (this) {
      neverRan = !ran;
      ran = true; // a loop started after close() would poll a closed consumer
    }
    if (closed.compareAndSet(false, true)) {
      if (neverRan) {
        consumer.close(CloseOptions.timeout(Duration.ofSeconds(5)));
      } else {
        consumer.wakeup();
      }
    }
    Thread t;
    synchronized (this) {
      t = thread;
    }
    if (t != null && t != Thread.currentThread()) {
      try {
        t.join(TimeUnit.SECONDS.toMillis(30));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  private void processAll(ConsumerRecords<K, V> records) {
    Map<TopicPartition, CompletableFuture<BatchOutcome>> stages = new LinkedHashMap<>();
    Map<TopicPartition, List<ConsumerRecord<K, V>>> batches = new HashMap<>();
    for (TopicPartition tp : records.partitions()) {
      Owned o = owned.get(tp);
      if (o == null) {
        continue; // not claimed (it is paused) or lost: its records are not ours to apply
      }
      List<ConsumerRecord<K, V>> batch = records.records(tp);
      batches.put(tp, batch);
      stats.polled(batch.size());
      stages.put(tp, stage(() -> store.process(group, tp, o.epoch, batch)));
    }
    for (Map.Entry<TopicPartition, CompletableFuture<BatchOutcome>> e : stages.entrySet()) {
      TopicPartition tp = e.getKey();
      BatchOutcome outcome = await(tp, e.getValue());
      List<ConsumerRecord<K, V>> batch = batches.get(tp);
      handle(tp, outcome, batch.get(0).offset(), batch);
    }
  }

  /** Acts on a partition's outcome; null: the store's outcome is unknown. */
  private void handle(
      TopicPartition tp,
      @Nullable BatchOutcome outcome,
      long firstOffset,
      List<ConsumerRecord<K, V>> batch) {
    Owned o = owned.get(tp);
    if (o == null) {
      return;
    }
    if (outcome == null) {
      // Unknown: the store may have applied some. Resume where it last said; anything applied is
      // skipped by the store on the way.
      seekBack(tp, o, firstOffset);
      backoff(tp, o, 1);
      return;
    }
    if (outcome instanceof BatchOutcome.Fenced f) {
      stats.fence();
      LOG.log(
          System.Logger.Level.WARNING,
          "{0} was claimed by another consumer of group {1} (epoch {2}, ours {3}): paused",
          tp,
          group,
          f.epoch(),
          o.epoch);
      // Kafka revokes the partition at the next poll if another member owns it now. If Kafka still
      // assigns it here after a backoff, the claim that fenced this one was not a rightful owner's
      // (one whose assignment has ended): claim it again then.
      owned.remove(tp);
      consumer.pause(List.of(tp));
      unclaimed.put(tp, System.nanoTime() + maxBackoff.toNanos());
      return;
    }
    long before = o.position;
    o.position = outcome.position();
    if (outcome instanceof BatchOutcome.Committed c) {
      stats.committed(applied(batch, before, outcome.position()) - c.duplicates(), c.duplicates());
      return;
    }
    BatchOutcome.Stopped s = (BatchOutcome.Stopped) outcome;
    stats.committed(applied(batch, before, s.position()), 0);
    if (!s.attempt()) {
      seekBack(tp, o, s.failedOffset());
      backoff(tp, o, 1);
      return;
    }
    stats.failed();
    if (o.failedOffset != s.failedOffset()) {
      o.failedOffset = s.failedOffset();
      o.failures = 0;
    }
    o.failures++;
    ConsumerRecord<K, V> failed = find(batch, s.failedOffset());
    if (o.failures >= maxAttempts && deadLetters != null && failed != null) {
      deadLetter(tp, o, failed, s.cause());
      return;
    }
    LOG.log(
        System.Logger.Level.WARNING,
        "record {0}@{1} failed (attempt {2} of {3}): {4}",
        tp,
        s.failedOffset(),
        o.failures,
        maxAttempts,
        String.valueOf(s.cause()));
    seekBack(tp, o, s.failedOffset());
    backoff(tp, o, o.failures);
  }

  private void deadLetter(TopicPartition tp, Owned o, ConsumerRecord<K, V> r, Throwable cause) {
    DeadLetters<K, V> dl = Objects.requireNonNull(deadLetters);
    try {
      dl.publish(r, cause, o.failures);
    } catch (Exception e) {
      LOG.log(
          System.Logger.Level.WARNING, "dead-lettering " + tp + "@" + r.offset() + " failed", e);
      seekBack(tp, o, r.offset());
      backoff(tp, o, o.failures);
      return;
    }
    BatchOutcome skipped = await(tp, stage(() -> store.skip(group, tp, o.epoch, r)));
    if (skipped instanceof BatchOutcome.Committed && skipped.position() > r.offset()) {
      stats.deadLetter();
      o.position = skipped.position();
      o.failedOffset = -1;
      o.failures = 0;
      consumer.seek(tp, o.position);
    } else {
      // Fenced or unknown: the record may be published again by its next owner (at least once).
      handle(tp, skipped, r.offset(), List.of(r));
    }
  }

  /** How many of {@code batch}'s records lie in [from, to): those the outcome moved past. */
  private static long applied(List<? extends ConsumerRecord<?, ?>> batch, long from, long to) {
    long n = 0;
    for (ConsumerRecord<?, ?> r : batch) {
      if (r.offset() >= from && r.offset() < to) {
        n++;
      }
    }
    return n;
  }

  private static <K, V> @Nullable ConsumerRecord<K, V> find(
      List<ConsumerRecord<K, V>> batch, long offset) {
    for (ConsumerRecord<K, V> r : batch) {
      if (r.offset() == offset) {
        return r;
      }
    }
    return null;
  }

  /** Seeks back to where the store stands, or to {@code fallback} if it holds no position yet. */
  private void seekBack(TopicPartition tp, Owned o, long fallback) {
    consumer.seek(tp, o.position >= 0 ? o.position : fallback);
  }

  /** Pauses {@code tp} for a backoff that doubles with {@code attempts}, up to maxBackoff. */
  private void backoff(TopicPartition tp, Owned o, int attempts) {
    long ms = Math.min(maxBackoff.toMillis(), 50L << Math.min(attempts, 10));
    o.pausedUntilNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
    consumer.pause(List.of(tp));
  }

  private void resumeDue() {
    long now = System.nanoTime();
    List<TopicPartition> due = new ArrayList<>();
    for (Map.Entry<TopicPartition, Owned> e : owned.entrySet()) {
      Owned o = e.getValue();
      if (o.pausedUntilNanos != 0 && now - o.pausedUntilNanos >= 0) {
        o.pausedUntilNanos = 0;
        due.add(e.getKey());
      }
    }
    if (!due.isEmpty()) {
      consumer.resume(due);
    }
  }

  /** Advances Kafka's committed offsets to the store's positions, for lag monitoring only. */
  private void commitToKafka() {
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (Map.Entry<TopicPartition, Owned> e : owned.entrySet()) {
      Owned o = e.getValue();
      if (o.position > o.committedToKafka) {
        offsets.put(e.getKey(), new OffsetAndMetadata(o.position));
        o.committedToKafka = o.position;
      }
    }
    if (!offsets.isEmpty()) {
      consumer.commitAsync(
          offsets,
          (done, e) -> {
            if (e != null) {
              LOG.log(System.Logger.Level.DEBUG, "Kafka offset commit (monitoring only)", e);
            }
          });
    }
  }

  /** Claims the partitions whose claim failed before, if their retry is due. */
  private void claimPending() {
    if (unclaimed.isEmpty()) {
      return;
    }
    long now = System.nanoTime();
    List<TopicPartition> due = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> e : unclaimed.entrySet()) {
      if (now - e.getValue() >= 0) {
        due.add(e.getKey());
      }
    }
    for (TopicPartition tp : due) {
      if (claim(tp)) {
        unclaimed.remove(tp);
        consumer.resume(List.of(tp));
      } else {
        unclaimed.put(tp, now + TimeUnit.MILLISECONDS.toNanos(maxBackoff.toMillis()));
      }
    }
  }

  /** Claims {@code tp} in the store and seeks to its stored position; false if the store failed. */
  private boolean claim(TopicPartition tp) {
    PartitionClaim c;
    try {
      c = stage(() -> store.claim(group, tp)).get(storeTimeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    } catch (Exception e) {
      LOG.log(System.Logger.Level.WARNING, "claiming " + tp + " in the store failed", e);
      stats.storeError();
      return false;
    }
    stats.claimed();
    owned.put(tp, new Owned(c.epoch(), c.position()));
    if (c.position() >= 0) {
      consumer.seek(tp, c.position());
    }
    return true;
  }

  private @Nullable BatchOutcome await(TopicPartition tp, CompletableFuture<BatchOutcome> f) {
    try {
      return f.get(storeTimeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return null;
    } catch (Exception e) {
      LOG.log(System.Logger.Level.WARNING, "the store did not settle " + tp + "'s records", e);
      stats.storeError();
      return null;
    }
  }

  private static <T> CompletableFuture<T> stage(
      java.util.function.Supplier<java.util.concurrent.CompletionStage<T>> s) {
    try {
      return s.get().toCompletableFuture();
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(e);
    }
  }

  private final class Rebalance implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      commitToKafka();
      drop(partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      drop(partitions);
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      for (TopicPartition tp : partitions) {
        if (!claim(tp)) {
          consumer.pause(List.of(tp));
          unclaimed.put(tp, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100));
        }
      }
    }

    private void drop(Collection<TopicPartition> partitions) {
      for (TopicPartition tp : partitions) {
        owned.remove(tp);
        unclaimed.remove(tp);
      }
    }
  }

  /** Builds an {@link ExactlyOnceConsumer}. */
  public static final class Builder<K, V> {
    private final Map<String, Object> config;
    private final Deserializer<K> keyDeserializer;
    private final Deserializer<V> valueDeserializer;
    private final ReceiverStore<K, V> store;
    private final String group;
    private final List<String> topics = new ArrayList<>();
    private int maxAttempts = 5;
    private @Nullable DeadLetters<K, V> deadLetters;
    private Duration pollTimeout = Duration.ofMillis(200);
    private Duration storeTimeout = Duration.ofSeconds(30);
    private Duration maxBackoff = Duration.ofSeconds(5);

    private Builder(
        Map<String, Object> config,
        Deserializer<K> keyDeserializer,
        Deserializer<V> valueDeserializer,
        ReceiverStore<K, V> store) {
      this.config = new HashMap<>(Objects.requireNonNull(config, "consumerConfig"));
      this.keyDeserializer = Objects.requireNonNull(keyDeserializer, "keyDeserializer");
      this.valueDeserializer = Objects.requireNonNull(valueDeserializer, "valueDeserializer");
      this.store = Objects.requireNonNull(store, "store");
      Object g = this.config.get(ConsumerConfig.GROUP_ID_CONFIG);
      if (g == null || g.toString().isEmpty()) {
        throw new IllegalArgumentException(
            "the consumer configuration needs group.id: the store keeps offsets per group");
      }
      this.group = g.toString();
      Object auto = this.config.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
      if (auto != null && Boolean.parseBoolean(auto.toString())) {
        throw new IllegalArgumentException(
            "enable.auto.commit must be false: the store holds the offsets, Kafka's are"
                + " committed after it for monitoring only");
      }
      this.config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    }

    /** The topics to subscribe to (at least one). */
    public Builder<K, V> topics(Collection<String> topics) {
      this.topics.clear();
      this.topics.addAll(topics);
      return this;
    }

    /** How many failures of a record before it is dead-lettered (default 5). */
    public Builder<K, V> maxAttempts(int n) {
      if (n < 1) {
        throw new IllegalArgumentException("maxAttempts must be at least 1, got " + n);
      }
      this.maxAttempts = n;
      return this;
    }

    /**
     * Where a record goes after {@code maxAttempts} failures. Without dead letters, a failing
     * record is retried with a backoff for as long as it fails, and holds its partition up.
     */
    public Builder<K, V> deadLetters(DeadLetters<K, V> deadLetters) {
      this.deadLetters = Objects.requireNonNull(deadLetters, "deadLetters");
      return this;
    }

    /** How long one poll waits for records (default 200 ms). */
    public Builder<K, V> pollTimeout(Duration d) {
      this.pollTimeout = positive("pollTimeout", d);
      return this;
    }

    /**
     * How long the loop waits for the store's answer to a claim or a batch (default 30 s); past it,
     * the outcome is unknown and the partition resumes from the last position the store gave. Keep
     * it well under {@code max.poll.interval.ms}.
     */
    public Builder<K, V> storeTimeout(Duration d) {
      this.storeTimeout = positive("storeTimeout", d);
      return this;
    }

    /** The longest backoff before a failed record or claim is retried (default 5 s). */
    public Builder<K, V> maxBackoff(Duration d) {
      this.maxBackoff = positive("maxBackoff", d);
      return this;
    }

    public ExactlyOnceConsumer<K, V> build() {
      if (topics.isEmpty()) {
        throw new IllegalArgumentException("no topics: set at least one with topics(...)");
      }
      return new ExactlyOnceConsumer<>(
          this, new KafkaConsumer<>(config, keyDeserializer, valueDeserializer));
    }

    private static Duration positive(String what, Duration d) {
      if (d == null || d.isNegative() || d.isZero()) {
        throw new IllegalArgumentException(what + " must be positive, got " + d);
      }
      return d;
    }
  }
}
