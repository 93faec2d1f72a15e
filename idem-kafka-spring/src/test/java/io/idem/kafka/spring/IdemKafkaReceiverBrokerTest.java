package io.idem.kafka.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.Write;
import io.idem.kafka.ReceiverStats;
import io.idem.kafka.idem.IdemReceiverStore;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.KafkaBroker;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaOperations;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;
import org.springframework.kafka.support.KafkaHeaders;

/**
 * A receiver bean against a real Kafka broker and its store on an embedded Idem cluster: the
 * context's receiver applies each record once, Kafka's committed offsets follow the store's for
 * monitoring, and the next context's receiver resumes from the store's offsets even after Kafka's
 * were reset to 0; a poison record goes to a dead-letter topic through Spring Kafka's recoverer.
 */
@Tag("slow")
@Timeout(300)
class IdemKafkaReceiverBrokerTest {
  static final String TOPIC = "payments";
  static final String GROUP = "billing";
  static final String REFUNDS = "refunds";
  static final Duration BOUND = Duration.ofSeconds(120);

  @TempDir static Path dir;
  static KafkaBroker broker;
  static LocalCluster cluster;
  static IdemClient client;

  /** The (partition, offset) of each record the handler was given, in this run. */
  static final Queue<TopicPartitionOffset> handled = new ConcurrentLinkedQueue<>();

  record TopicPartitionOffset(int partition, long offset) {}

  @BeforeAll
  static void start() throws Exception {
    broker = KafkaBroker.builder().partitions(2).start();
    try (Admin admin = admin()) {
      admin
          .createTopics(
              List.of(
                  new NewTopic(TOPIC, Optional.empty(), Optional.empty()),
                  new NewTopic(REFUNDS, Optional.empty(), Optional.empty()),
                  new NewTopic(REFUNDS + "-dlt", Optional.empty(), Optional.empty())))
          .all()
          .get(60, TimeUnit.SECONDS);
    }
    cluster = LocalCluster.start(1, dir);
    client = IdemClient.builder().servers(String.join(",", cluster.clientAddresses())).build();
  }

  @AfterAll
  static void stop() throws Exception {
    if (client != null) {
      client.close();
    }
    if (cluster != null) {
      cluster.close();
    }
    if (broker != null) {
      broker.close();
    }
  }

  /** Each record credits its key's account with its value. */
  @Configuration(proxyBeanMethods = false)
  static class Payments {
    @Bean
    IdemKafkaReceiver<String, String> payments() {
      IdemReceiverStore<String, String> store =
          IdemReceiverStore.<String, String>builder(
                  client,
                  (r, token) -> {
                    handled.add(new TopicPartitionOffset(r.partition(), r.offset()));
                    return Write.increment("paid/" + r.key(), Long.parseLong(r.value()));
                  })
              .build();
      return IdemKafkaReceiver.builder(
              "payments", new StringDeserializer(), new StringDeserializer(), store)
          .topics(TOPIC)
          .build();
    }
  }

  /**
   * Each record refunds its key's account its value; a value that is not a number fails, twice, and
   * goes to refunds-dlt through Spring Kafka's recoverer on Boot's template.
   */
  @Configuration(proxyBeanMethods = false)
  static class Refunds {
    @Bean
    IdemKafkaReceiver<String, String> refunds(KafkaOperations<?, ?> template) {
      IdemReceiverStore<String, String> store =
          IdemReceiverStore.<String, String>builder(
                  client,
                  (r, token) -> Write.increment("refunded/" + r.key(), Long.parseLong(r.value())))
              .build();
      return IdemKafkaReceiver.builder(
              "refunds", new StringDeserializer(), new StringDeserializer(), store)
          .topics(REFUNDS)
          .group("refunders")
          .maxAttempts(2)
          .maxBackoff(Duration.ofMillis(200))
          .deadLetters(SpringDeadLetters.of(new DeadLetterPublishingRecoverer(template)))
          .build();
    }
  }

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(KafkaAutoConfiguration.class, IdemKafkaAutoConfiguration.class))
          .withPropertyValues(
              "spring.kafka.bootstrap-servers=" + broker.bootstrapServers(),
              "spring.kafka.consumer.group-id=" + GROUP,
              "spring.kafka.consumer.auto-offset-reset=earliest");

  @Test
  void eachRecordIsAppliedOnceAndTheNextRunResumesFromTheStoresOffsetsNotKafkas() throws Exception {
    produce(0, 20);
    runner
        .withUserConfiguration(Payments.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              ReceiverStats stats = context.getBean(IdemKafkaReceivers.class).stats("payments");
              assertThat(stats).isNotNull();
              await("20 records applied", () -> stats.applied() == 20);
              await("Kafka's committed offsets at 20", () -> kafkaCommitted() == 20);
              assertThat(stats.claims()).isGreaterThanOrEqualTo(2);
            });
    assertThat(balances()).isEqualTo(expected(0, 20));
    Map<Integer, Long> endOfFirstRun = endOffsets();

    // Kafka's offsets back to 0: a receiver that started from them would hand the first 20 records
    // to the handler again.
    resetKafkaOffsetsToZero();
    handled.clear();
    produce(20, 10);
    runner
        .withUserConfiguration(Payments.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              ReceiverStats stats = context.getBean(IdemKafkaReceivers.class).stats("payments");
              assertThat(stats).isNotNull();
              await("10 more records applied", () -> stats.applied() == 10);
              assertThat(stats.duplicates()).isZero();
            });
    assertThat(balances()).isEqualTo(expected(0, 30));
    for (TopicPartitionOffset h : handled) {
      assertThat(h.offset())
          .as("partition %d's handled offset", h.partition())
          .isGreaterThanOrEqualTo(endOfFirstRun.getOrDefault(h.partition(), 0L));
    }
  }

  @Test
  void aPoisonRecordGoesToTheDeadLetterTopicThroughSpringsRecovererAndThePartitionGoesOn()
      throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (String v : List.of("5", "x", "7")) {
        producer.send(new ProducerRecord<>(REFUNDS, "acct-9", v)).get(60, TimeUnit.SECONDS);
      }
    }
    runner
        .withUserConfiguration(Refunds.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              ReceiverStats stats = context.getBean(IdemKafkaReceivers.class).stats("refunds");
              assertThat(stats).isNotNull();
              await(
                  "2 applied and 1 dead-lettered",
                  () -> stats.applied() == 2 && stats.deadLettered() == 1);
              assertThat(stats.failures()).isEqualTo(2);
            });
    assertThat(client.get("refunded/acct-9").map(KeyValue::valueAsString)).contains("12");
    List<ConsumerRecord<String, String>> dead = readAll(REFUNDS + "-dlt", 1);
    assertThat(dead).extracting(ConsumerRecord::value).containsExactly("x");
    assertThat(dead.get(0).headers().lastHeader(KafkaHeaders.DLT_ORIGINAL_OFFSET)).isNotNull();
    assertThat(dead.get(0).headers().lastHeader(KafkaHeaders.DLT_EXCEPTION_FQCN).value())
        .asString()
        .contains("NumberFormatException");
  }

  /** Reads {@code topic} from the beginning until {@code n} records came, within BOUND. */
  static List<ConsumerRecord<String, String>> readAll(String topic, int n) {
    Map<String, Object> c =
        Map.of(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    List<ConsumerRecord<String, String>> out = new java.util.ArrayList<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> parts =
          consumer.partitionsFor(topic, Duration.ofSeconds(60)).stream()
              .map(i -> new TopicPartition(topic, i.partition()))
              .toList();
      consumer.assign(parts);
      consumer.seekToBeginning(parts);
      long end = System.nanoTime() + BOUND.toNanos();
      while (out.size() < n && System.nanoTime() - end < 0) {
        consumer.poll(Duration.ofMillis(200)).forEach(out::add);
      }
    }
    return out;
  }

  static Admin admin() {
    return Admin.create(
        Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers()));
  }

  /** Record i: key acct-(i mod 3), value i + 1. */
  static void produce(int from, int n) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (int i = from; i < from + n; i++) {
        producer
            .send(new ProducerRecord<>(TOPIC, "acct-" + (i % 3), Integer.toString(i + 1)))
            .get(60, TimeUnit.SECONDS);
      }
    }
  }

  static Map<String, Long> expected(int from, int to) {
    return java.util.stream.IntStream.range(from, to)
        .boxed()
        .collect(Collectors.groupingBy(i -> "acct-" + (i % 3), Collectors.summingLong(i -> i + 1)));
  }

  static Map<String, Long> balances() {
    return java.util.stream.Stream.of("acct-0", "acct-1", "acct-2")
        .collect(
            Collectors.toMap(
                a -> a,
                a ->
                    client
                        .get("paid/" + a)
                        .map(KeyValue::valueAsString)
                        .map(Long::parseLong)
                        .orElse(0L)));
  }

  static Map<TopicPartition, OffsetAndMetadata> committed() throws Exception {
    try (Admin admin = admin()) {
      return admin
          .listConsumerGroupOffsets(GROUP)
          .partitionsToOffsetAndMetadata()
          .get(60, TimeUnit.SECONDS);
    }
  }

  static long kafkaCommitted() {
    try {
      return committed().values().stream()
          .filter(o -> o != null)
          .mapToLong(OffsetAndMetadata::offset)
          .sum();
    } catch (Exception e) {
      return -1;
    }
  }

  static Map<Integer, Long> endOffsets() throws Exception {
    return committed().entrySet().stream()
        .collect(Collectors.toMap(e -> e.getKey().partition(), e -> e.getValue().offset()));
  }

  /** Retries while the group still has the last run's member (its leave may lag the close). */
  static void resetKafkaOffsetsToZero() throws Exception {
    Map<TopicPartition, OffsetAndMetadata> zero =
        committed().keySet().stream()
            .collect(Collectors.toMap(tp -> tp, tp -> new OffsetAndMetadata(0)));
    long end = System.nanoTime() + BOUND.toNanos();
    while (true) {
      try (Admin admin = admin()) {
        admin.alterConsumerGroupOffsets(GROUP, zero).all().get(60, TimeUnit.SECONDS);
        break;
      } catch (java.util.concurrent.ExecutionException e) {
        if (System.nanoTime() - end > 0) {
          throw e;
        }
        Thread.sleep(200);
      }
    }
    assertThat(kafkaCommitted()).isZero();
  }

  static void await(String what, BooleanSupplier done) throws InterruptedException {
    long end = System.nanoTime() + BOUND.toNanos();
    while (!done.getAsBoolean()) {
      if (System.nanoTime() - end > 0) {
        throw new AssertionError("not within " + BOUND + ": " + what);
      }
      Thread.sleep(50);
    }
  }
}
