package io.idem.kafka.spring;

import io.idem.kafka.DeadLetters;
import io.idem.kafka.ExactlyOnceConsumer;
import io.idem.kafka.spi.ReceiverStore;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;

/**
 * A receiver declared as a bean: which topics an {@link ExactlyOnceConsumer} reads, for which
 * group, into which store (whose handler runs once per record). {@link IdemKafkaReceivers} runs one
 * consumer per such bean, with the application's {@code spring.kafka.consumer.*} configuration.
 *
 * <pre>{@code
 * @Bean
 * IdemKafkaReceiver<String, String> payments(IdemClient idem) {
 *   var store = IdemReceiverStore.<String, String>builder(idem, (record, token) -> ...).build();
 *   return IdemKafkaReceiver.builder("payments", new StringDeserializer(), new StringDeserializer(), store)
 *       .topics("payments")
 *       .build();
 * }
 * }</pre>
 *
 * <p>A setting left unset here ({@link #group()}, {@link #maxAttempts()}, the durations) is taken
 * from {@code spring.kafka.consumer.group-id} and the {@code idem.kafka.*} properties ({@link
 * IdemKafkaProperties}) when the receiver starts. Immutable; the builder is not thread-safe.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
public final class IdemKafkaReceiver<K, V> {
  private final String name;
  private final List<String> topics;
  private final @Nullable String group;
  private final Deserializer<K> keyDeserializer;
  private final Deserializer<V> valueDeserializer;
  private final ReceiverStore<K, V> store;
  private final @Nullable DeadLetters<K, V> deadLetters;
  private final @Nullable Integer maxAttempts;
  private final @Nullable Duration pollTimeout;
  private final @Nullable Duration storeTimeout;
  private final @Nullable Duration maxBackoff;
  private final Map<String, Object> consumerProperties;

  private IdemKafkaReceiver(Builder<K, V> b) {
    this.name = b.name;
    this.topics = List.copyOf(b.topics);
    this.group = b.group;
    this.keyDeserializer = b.keyDeserializer;
    this.valueDeserializer = b.valueDeserializer;
    this.store = b.store;
    this.deadLetters = b.deadLetters;
    this.maxAttempts = b.maxAttempts;
    this.pollTimeout = b.pollTimeout;
    this.storeTimeout = b.storeTimeout;
    this.maxBackoff = b.maxBackoff;
    this.consumerProperties = Map.copyOf(b.consumerProperties);
  }

  /**
   * A builder for the receiver {@code name} (unique among the application's receivers; it names the
   * loop's thread and the metrics' {@code receiver} tag).
   */
  public static <K, V> Builder<K, V> builder(
      String name,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      ReceiverStore<K, V> store) {
    return new Builder<>(name, keyDeserializer, valueDeserializer, store);
  }

  /** The receiver's name. */
  public String name() {
    return name;
  }

  /** The topics it subscribes to (at least one). */
  public List<String> topics() {
    return topics;
  }

  /** Its consumer group, or null for {@code spring.kafka.consumer.group-id}. */
  public @Nullable String group() {
    return group;
  }

  /** The records' key deserializer. */
  public Deserializer<K> keyDeserializer() {
    return keyDeserializer;
  }

  /** The records' value deserializer. */
  public Deserializer<V> valueDeserializer() {
    return valueDeserializer;
  }

  /** The store that runs the handler and keeps the partitions' offsets. */
  public ReceiverStore<K, V> store() {
    return store;
  }

  /** Where a record goes after {@link #maxAttempts()} failures; null: it is retried forever. */
  public @Nullable DeadLetters<K, V> deadLetters() {
    return deadLetters;
  }

  /** Failures of a record before it is dead-lettered; null for {@code idem.kafka.max-attempts}. */
  public @Nullable Integer maxAttempts() {
    return maxAttempts;
  }

  /** How long one poll waits; null for {@code idem.kafka.poll-timeout}. */
  public @Nullable Duration pollTimeout() {
    return pollTimeout;
  }

  /** How long the loop waits for the store; null for {@code idem.kafka.store-timeout}. */
  public @Nullable Duration storeTimeout() {
    return storeTimeout;
  }

  /** The longest retry backoff; null for {@code idem.kafka.max-backoff}. */
  public @Nullable Duration maxBackoff() {
    return maxBackoff;
  }

  /** Consumer properties that override {@code spring.kafka.consumer.*} for this receiver. */
  public Map<String, Object> consumerProperties() {
    return consumerProperties;
  }

  @Override
  public String toString() {
    return "IdemKafkaReceiver[" + name + " topics=" + topics + " group=" + group + "]";
  }

  /** Builds an {@link IdemKafkaReceiver}; every setting but the topics is optional. */
  public static final class Builder<K, V> {
    private final String name;
    private final Deserializer<K> keyDeserializer;
    private final Deserializer<V> valueDeserializer;
    private final ReceiverStore<K, V> store;
    private List<String> topics = List.of();
    private @Nullable String group;
    private @Nullable DeadLetters<K, V> deadLetters;
    private @Nullable Integer maxAttempts;
    private @Nullable Duration pollTimeout;
    private @Nullable Duration storeTimeout;
    private @Nullable Duration maxBackoff;
    private final Map<String, Object> consumerProperties = new LinkedHashMap<>();

    private Builder(
        String name,
        Deserializer<K> keyDeserializer,
        Deserializer<V> valueDeserializer,
        ReceiverStore<K, V> store) {
      Objects.requireNonNull(name, "name");
      if (name.isBlank()) {
        throw new IllegalArgumentException("a receiver's name must not be blank");
      }
      this.name = name;
      this.keyDeserializer = Objects.requireNonNull(keyDeserializer, "keyDeserializer");
      this.valueDeserializer = Objects.requireNonNull(valueDeserializer, "valueDeserializer");
      this.store = Objects.requireNonNull(store, "store");
    }

    /** The topics to subscribe to (at least one). */
    public Builder<K, V> topics(String... topics) {
      return topics(List.of(topics));
    }

    /** The topics to subscribe to (at least one). */
    public Builder<K, V> topics(List<String> topics) {
      for (String t : topics) {
        if (t == null || t.isBlank()) {
          throw new IllegalArgumentException("receiver " + name + ": a blank topic in " + topics);
        }
      }
      this.topics = List.copyOf(topics);
      return this;
    }

    /** The consumer group (default: {@code spring.kafka.consumer.group-id}). */
    public Builder<K, V> group(String group) {
      Objects.requireNonNull(group, "group");
      if (group.isBlank()) {
        throw new IllegalArgumentException("receiver " + name + ": a blank group");
      }
      this.group = group;
      return this;
    }

    /** Where a record goes after {@code maxAttempts} failures (default: none, retried forever). */
    public Builder<K, V> deadLetters(DeadLetters<K, V> deadLetters) {
      this.deadLetters = Objects.requireNonNull(deadLetters, "deadLetters");
      return this;
    }

    /**
     * Failures of a record before it is dead-lettered (default {@code idem.kafka.max-attempts}).
     */
    public Builder<K, V> maxAttempts(int n) {
      this.maxAttempts = IdemKafkaProperties.atLeastOne("maxAttempts", n);
      return this;
    }

    /** How long one poll waits (default {@code idem.kafka.poll-timeout}). */
    public Builder<K, V> pollTimeout(Duration d) {
      this.pollTimeout = IdemKafkaProperties.positive("pollTimeout", d);
      return this;
    }

    /** How long the loop waits for the store (default {@code idem.kafka.store-timeout}). */
    public Builder<K, V> storeTimeout(Duration d) {
      this.storeTimeout = IdemKafkaProperties.positive("storeTimeout", d);
      return this;
    }

    /** The longest retry backoff (default {@code idem.kafka.max-backoff}). */
    public Builder<K, V> maxBackoff(Duration d) {
      this.maxBackoff = IdemKafkaProperties.positive("maxBackoff", d);
      return this;
    }

    /**
     * A consumer property ({@code ConsumerConfig} name) for this receiver only, over {@code
     * spring.kafka.consumer.*}. {@code enable.auto.commit} cannot be true.
     */
    public Builder<K, V> consumerProperty(String key, Object value) {
      consumerProperties.put(
          Objects.requireNonNull(key, "key"), Objects.requireNonNull(value, "value"));
      return this;
    }

    public IdemKafkaReceiver<K, V> build() {
      if (topics.isEmpty()) {
        throw new IllegalArgumentException(
            "receiver " + name + " has no topics: set at least one with topics(...)");
      }
      return new IdemKafkaReceiver<>(this);
    }
  }
}
