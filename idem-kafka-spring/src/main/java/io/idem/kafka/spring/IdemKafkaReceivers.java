package io.idem.kafka.spring;

import io.idem.kafka.DeadLetters;
import io.idem.kafka.ExactlyOnceConsumer;
import io.idem.kafka.ReceiverStats;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.jspecify.annotations.Nullable;
import org.springframework.context.SmartLifecycle;

/**
 * Runs an {@link ExactlyOnceConsumer} for each {@link IdemKafkaReceiver}, each loop on its own
 * thread ({@code idem-kafka-<name>}), starting and stopping with the application context. The loop
 * is the library's own, unchanged: it claims each assigned partition in the receiver's store and
 * seeks to the store's offset, and the store fences a consumer that lost its partition.
 *
 * <p>Each consumer's configuration is the application's consumer configuration (Spring Boot's
 * {@code spring.kafka.consumer.*} with its connection details, as the {@code ConsumerFactory} bean
 * holds it; a {@code client.id} there gets the receiver's name appended), then the receiver's
 * {@link IdemKafkaReceiver#consumerProperties()}, then its group. The configurations are checked
 * when this is made, so a receiver without a group, or with {@code enable.auto.commit=true}, fails
 * the context's start with a message that names it.
 *
 * <p>Starts in {@link #PHASE}, the phase of Spring Kafka's listener containers: after the beans it
 * uses are ready, and stopped before they are destroyed. Thread-safe.
 */
public final class IdemKafkaReceivers implements SmartLifecycle {
  private static final System.Logger LOG = System.getLogger(IdemKafkaReceivers.class.getName());

  /** The lifecycle phase: Spring Kafka's {@code AbstractMessageListenerContainer.DEFAULT_PHASE}. */
  public static final int PHASE = Integer.MAX_VALUE - 100;

  /** How long {@link #stop()} waits for each loop to close its Kafka consumer and end. */
  public static final Duration STOP_BOUND = Duration.ofSeconds(30);

  private final Map<String, Resolved<?, ?>> receivers;
  private final boolean autoStartup;

  /**
   * The loops of the current run, by receiver name; empty when stopped. Replaced, never mutated.
   */
  private volatile Map<String, Running> running = Map.of();

  private volatile boolean started;

  /** A receiver with every default filled in, and its consumer configuration. */
  private record Resolved<K, V>(IdemKafkaReceiver<K, V> receiver, Map<String, Object> config) {}

  /** One receiver's loop. */
  private record Running(ExactlyOnceConsumer<?, ?> consumer, Thread thread) {}

  /**
   * Checks and resolves {@code receivers} against the application's {@code consumerConfig} and the
   * {@code idem.kafka.*} defaults; nothing connects until {@link #start()}.
   *
   * @throws IllegalArgumentException naming the receiver: two receivers of one name, no group, or
   *     {@code enable.auto.commit=true}
   */
  public IdemKafkaReceivers(
      List<? extends IdemKafkaReceiver<?, ?>> receivers,
      Map<String, Object> consumerConfig,
      IdemKafkaProperties properties) {
    Map<String, Resolved<?, ?>> byName = new LinkedHashMap<>();
    for (IdemKafkaReceiver<?, ?> r : receivers) {
      if (byName.containsKey(r.name())) {
        throw new IllegalArgumentException("two Idem Kafka receivers are named '" + r.name() + "'");
      }
      byName.put(r.name(), resolve(r, consumerConfig, properties));
    }
    this.receivers = Collections.unmodifiableMap(byName);
    this.autoStartup = properties.isAutoStartup();
  }

  private static <K, V> Resolved<K, V> resolve(
      IdemKafkaReceiver<K, V> r, Map<String, Object> base, IdemKafkaProperties p) {
    Map<String, Object> config = new HashMap<>(base);
    Object clientId = base.get(ConsumerConfig.CLIENT_ID_CONFIG);
    if (clientId != null && !clientId.toString().isEmpty()) {
      // One client.id per consumer, as Spring Kafka's containers suffix theirs: a shared one
      // makes the consumers' metrics collide.
      config.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId + "-" + r.name());
    }
    config.putAll(r.consumerProperties());
    String group = r.group();
    if (group == null) {
      Object g = config.get(ConsumerConfig.GROUP_ID_CONFIG);
      group = g == null ? "" : g.toString();
    }
    if (group.isBlank()) {
      throw new IllegalArgumentException(
          "Idem Kafka receiver '"
              + r.name()
              + "' has no consumer group: set group(...) on it, or spring.kafka.consumer.group-id;"
              + " the store keeps offsets per group");
    }
    config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    Object auto = config.get(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG);
    if (auto != null && Boolean.parseBoolean(auto.toString())) {
      throw new IllegalArgumentException(
          "Idem Kafka receiver '"
              + r.name()
              + "' has enable.auto.commit=true (spring.kafka.consumer.enable-auto-commit or its"
              + " consumerProperty): it must be false, the store holds the offsets and Kafka's are"
              + " committed after it for monitoring only");
    }
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    IdemKafkaReceiver.Builder<K, V> b =
        IdemKafkaReceiver.builder(r.name(), r.keyDeserializer(), r.valueDeserializer(), r.store())
            .topics(r.topics())
            .group(group)
            .maxAttempts(orElse(r.maxAttempts(), p.getMaxAttempts()))
            .pollTimeout(orElse(r.pollTimeout(), p.getPollTimeout()))
            .storeTimeout(orElse(r.storeTimeout(), p.getStoreTimeout()))
            .maxBackoff(orElse(r.maxBackoff(), p.getMaxBackoff()));
    r.consumerProperties().forEach(b::consumerProperty);
    DeadLetters<K, V> dl = r.deadLetters();
    if (dl != null) {
      b.deadLetters(dl);
    }
    return new Resolved<>(b.build(), Collections.unmodifiableMap(config));
  }

  private static <T> T orElse(@Nullable T value, T fallback) {
    return value != null ? value : fallback;
  }

  /** The receivers' names, in declaration order of their beans. */
  public List<String> names() {
    return List.copyOf(receivers.keySet());
  }

  /**
   * The receiver {@code name} as it runs: its group, attempts and durations filled in from {@code
   * spring.kafka.consumer.group-id} and {@code idem.kafka.*} where it left them unset.
   *
   * @throws IllegalArgumentException if there is no such receiver
   */
  public IdemKafkaReceiver<?, ?> receiver(String name) {
    return resolved(name).receiver();
  }

  /** The consumer configuration of the receiver {@code name} (unmodifiable). */
  public Map<String, Object> consumerConfig(String name) {
    return resolved(name).config();
  }

  /**
   * What the receiver {@code name} has done since it last started, or null if it has not started.
   */
  public @Nullable ReceiverStats stats(String name) {
    resolved(name);
    Running r = running.get(name);
    return r == null ? null : r.consumer().stats();
  }

  /** Whether the receiver {@code name}'s loop is running (false after it ended on an error). */
  public boolean isRunning(String name) {
    resolved(name);
    Running r = running.get(name);
    return r != null && r.thread().isAlive();
  }

  private Resolved<?, ?> resolved(String name) {
    Resolved<?, ?> r = receivers.get(name);
    if (r == null) {
      throw new IllegalArgumentException(
          "no Idem Kafka receiver named '" + name + "'; there are " + receivers.keySet());
    }
    return r;
  }

  /**
   * Builds each receiver's consumer and starts its loop. If one cannot be built (a configuration
   * Kafka refuses), those started are stopped and the error names the receiver.
   */
  @Override
  public synchronized void start() {
    if (started) {
      return;
    }
    Map<String, Running> loops = new LinkedHashMap<>();
    for (Resolved<?, ?> r : receivers.values()) {
      String name = r.receiver().name();
      ExactlyOnceConsumer<?, ?> consumer;
      try {
        consumer = build(r);
      } catch (RuntimeException e) {
        stopAll(loops);
        throw new IllegalStateException(
            "Idem Kafka receiver '" + name + "' could not make its Kafka consumer: " + e, e);
      }
      Thread t = new Thread(() -> runLoop(name, consumer), "idem-kafka-" + name);
      t.setDaemon(true);
      loops.put(name, new Running(consumer, t));
      t.start();
    }
    running = Map.copyOf(loops);
    started = true;
  }

  private static <K, V> ExactlyOnceConsumer<K, V> build(Resolved<K, V> r) {
    IdemKafkaReceiver<K, V> rc = r.receiver();
    ExactlyOnceConsumer.Builder<K, V> b =
        ExactlyOnceConsumer.builder(
                r.config(), rc.keyDeserializer(), rc.valueDeserializer(), rc.store())
            .topics(rc.topics())
            .maxAttempts(Objects.requireNonNull(rc.maxAttempts()))
            .pollTimeout(Objects.requireNonNull(rc.pollTimeout()))
            .storeTimeout(Objects.requireNonNull(rc.storeTimeout()))
            .maxBackoff(Objects.requireNonNull(rc.maxBackoff()));
    DeadLetters<K, V> dl = rc.deadLetters();
    if (dl != null) {
      b.deadLetters(dl);
    }
    return b.build();
  }

  private static void runLoop(String name, ExactlyOnceConsumer<?, ?> consumer) {
    try {
      consumer.run();
    } catch (RuntimeException e) {
      LOG.log(System.Logger.Level.ERROR, "Idem Kafka receiver '" + name + "' stopped", e);
    }
  }

  /** Closes each loop (which closes its Kafka consumer) and waits for it, up to STOP_BOUND each. */
  @Override
  public synchronized void stop() {
    Map<String, Running> r = running;
    running = Map.of();
    started = false;
    stopAll(r);
  }

  private static void stopAll(Map<String, Running> loops) {
    for (Running r : loops.values()) {
      r.consumer().close();
    }
    List<String> stuck = new ArrayList<>();
    for (Map.Entry<String, Running> e : loops.entrySet()) {
      Thread t = e.getValue().thread();
      try {
        t.join(STOP_BOUND.toMillis());
      } catch (InterruptedException ex) {
        Thread.currentThread().interrupt();
        return;
      }
      if (t.isAlive()) {
        stuck.add(e.getKey());
      }
    }
    if (!stuck.isEmpty()) {
      LOG.log(System.Logger.Level.WARNING, "Idem Kafka receivers still running: {0}", stuck);
    }
  }

  /** Whether it has started and not stopped since (a loop may have ended on an error). */
  @Override
  public boolean isRunning() {
    return started;
  }

  @Override
  public boolean isAutoStartup() {
    return autoStartup;
  }

  @Override
  public int getPhase() {
    return PHASE;
  }
}
