package io.idem.kafka.idem;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.Write;
import io.idem.kafka.DeadLetters;
import io.idem.kafka.ExactlyOnceConsumer;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.KafkaBroker;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
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

/**
 * The receiver end to end: a real broker process, a three-node Idem cluster, consumers in this JVM.
 * Records are applied once across rebalances, and a consumer that lost its partitions while its
 * handler ran past {@code max.poll.interval.ms} is refused by the store when it commits late.
 */
@Tag("slow")
@Timeout(300)
class ExactlyOnceConsumerTest {
  @TempDir static Path dir;
  static KafkaBroker broker;
  static LocalCluster cluster;
  static IdemClient client;

  @BeforeAll
  static void start() throws Exception {
    broker =
        KafkaBroker.builder()
            .property("group.min.session.timeout.ms", "1000")
            .property("group.initial.rebalance.delay.ms", "0")
            .start();
    cluster = LocalCluster.start(3, dir);
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

  private static void produce(String topic, int partitions, int n) throws Exception {
    try (Admin admin =
        Admin.create(
            Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers()))) {
      admin
          .createTopics(List.of(new NewTopic(topic, partitions, (short) 1)))
          .all()
          .get(60, TimeUnit.SECONDS);
    }
    Map<String, Object> p = new HashMap<>();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < n; i++) {
        producer.send(new ProducerRecord<>(topic, i % partitions, null, "m" + i));
      }
      producer.flush();
    }
  }

  private static Map<String, Object> config(String group, int sessionMs) {
    Map<String, Object> c = new HashMap<>();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    c.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
    c.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, sessionMs / 4);
    c.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, sessionMs);
    c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
    return c;
  }

  private static ExactlyOnceConsumer<String, String> consumer(
      String group, String topic, int sessionMs, IdemRecordHandler<String, String> handler) {
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(client, handler).build();
    return ExactlyOnceConsumer.builder(
            config(group, sessionMs), new StringDeserializer(), new StringDeserializer(), store)
        .topics(List.of(topic))
        .storeTimeout(Duration.ofSeconds(20))
        .build();
  }

  /** Appends the record's offset to its partition's ledger list. */
  private static Write ledger(String topic, int partition, long offset) {
    return Write.append(
        "ledger/" + topic + "/" + partition,
        Long.toString(offset).getBytes(StandardCharsets.UTF_8));
  }

  private static List<Long> ledgerOf(String topic, int partition) {
    List<Long> out = new ArrayList<>();
    client
        .get("ledger/" + topic + "/" + partition)
        .ifPresent(
            kv -> {
              for (byte[] e : kv.elements()) {
                out.add(Long.parseLong(new String(e, StandardCharsets.UTF_8)));
              }
            });
    return out;
  }

  private static long cursor(String group, String topic, int partition) {
    return client
        .get("kafka/" + group + "/" + topic + "/" + partition)
        .map(KeyValue::valueAsString)
        .map(v -> Long.parseLong(v.substring(v.indexOf("position=") + 9)))
        .orElse(-1L);
  }

  private static void awaitCursors(String group, String topic, int partitions, long each)
      throws InterruptedException {
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
    while (System.nanoTime() < until) {
      boolean done = true;
      for (int p = 0; p < partitions; p++) {
        done &= cursor(group, topic, p) >= each;
      }
      if (done) {
        return;
      }
      Thread.sleep(200);
    }
  }

  @Test
  void recordsAreAppliedOnceInOffsetOrderAcrossRebalances() throws Exception {
    produce("pay", 3, 600);
    ExactlyOnceConsumer<String, String> a =
        consumer("g1", "pay", 6_000, (r, t) -> ledger(r.topic(), r.partition(), r.offset()));
    ExactlyOnceConsumer<String, String> b =
        consumer("g1", "pay", 6_000, (r, t) -> ledger(r.topic(), r.partition(), r.offset()));
    a.start();
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (a.stats().applied() < 100 && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    b.start(); // a rebalance while a works
    Thread.sleep(1_000);
    a.close(); // and another as it leaves
    awaitCursors("g1", "pay", 3, 200);
    b.close();
    for (int p = 0; p < 3; p++) {
      List<Long> expected = new ArrayList<>();
      for (long o = 0; o < 200; o++) {
        expected.add(o);
      }
      assertThat(ledgerOf("pay", p)).as("partition %d's ledger", p).isEqualTo(expected);
      assertThat(cursor("g1", "pay", p)).isEqualTo(200);
    }
    assertThat(a.stats().applied() + b.stats().applied()).isEqualTo(600);
    // Kafka's committed offsets follow the store's, for lag monitoring.
    try (Admin admin =
        Admin.create(
            Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers()))) {
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin
              .listConsumerGroupOffsets("g1")
              .partitionsToOffsetAndMetadata()
              .get(30, TimeUnit.SECONDS);
      for (int p = 0; p < 3; p++) {
        assertThat(committed.get(new TopicPartition("pay", p)).offset()).isEqualTo(200);
      }
    }
  }

  @Test
  void aConsumerThatLostItsPartitionWhileItsHandlerRanIsFencedByTheStore() throws Exception {
    produce("slow", 1, 20);
    AtomicBoolean stall = new AtomicBoolean(true);
    // a's handler stalls on the first record past max.poll.interval.ms (2 s): the group drops a.
    ExactlyOnceConsumer<String, String> a =
        consumer(
            "g2",
            "slow",
            2_000,
            (r, t) -> {
              if (stall.getAndSet(false)) {
                Thread.sleep(6_000);
              }
              return ledger(r.topic(), r.partition(), r.offset());
            });
    ExactlyOnceConsumer<String, String> b =
        consumer("g2", "slow", 2_000, (r, t) -> ledger(r.topic(), r.partition(), r.offset()));
    a.start();
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (stall.get() && System.nanoTime() < until) {
      Thread.sleep(20);
    }
    b.start(); // takes the partition over once a is dropped, and claims it
    awaitCursors("g2", "slow", 1, 20);
    until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (a.stats().fenced() == 0 && System.nanoTime() < until) {
      Thread.sleep(50);
    }
    a.close();
    b.close();
    assertThat(a.stats().fenced()).as("a's late commit was refused").isPositive();
    List<Long> expected = new ArrayList<>();
    for (long o = 0; o < 20; o++) {
      expected.add(o);
    }
    assertThat(ledgerOf("slow", 0)).isEqualTo(expected);
    assertThat(b.stats().claims()).isPositive();
  }

  @Test
  void aPartitionFencedWhileKafkaStillAssignsItIsClaimedAgainAfterTheBackoff() throws Exception {
    produce("steal", 1, 100);
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(
                client,
                (r, t) -> {
                  Thread.sleep(20);
                  return ledger(r.topic(), r.partition(), r.offset());
                })
            .build();
    Map<String, Object> config = config("g3", 6_000);
    config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10);
    ExactlyOnceConsumer<String, String> a =
        ExactlyOnceConsumer.builder(
                config, new StringDeserializer(), new StringDeserializer(), store)
            .topics(List.of("steal"))
            .maxBackoff(Duration.ofMillis(500))
            .build();
    a.start();
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (a.stats().applied() < 20 && System.nanoTime() < until) {
      Thread.sleep(10);
    }
    // A claim from outside the group: a is fenced, but Kafka still assigns it the partition.
    client.claimCursor("kafka/g3/steal/0");
    awaitCursors("g3", "steal", 1, 100);
    a.close();
    assertThat(a.stats().fenced()).isPositive();
    assertThat(a.stats().claims()).isGreaterThanOrEqualTo(2);
    List<Long> expected = new ArrayList<>();
    for (long o = 0; o < 100; o++) {
      expected.add(o);
    }
    assertThat(ledgerOf("steal", 0)).isEqualTo(expected);
  }

  @Test
  void aPoisonRecordGoesToTheDeadLettersAfterMaxAttemptsAndItsPartitionGoesOn() throws Exception {
    produce("poison", 1, 10);
    produce("poison.DLT", 1, 0); // the dead-letter topic exists: the broker creates none by itself
    AtomicInteger attempts = new AtomicInteger();
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(
                client,
                (r, t) -> {
                  if (r.offset() == 3) {
                    attempts.incrementAndGet();
                    throw new IllegalArgumentException("cannot parse " + r.value());
                  }
                  return ledger(r.topic(), r.partition(), r.offset());
                })
            .build();
    Map<String, Object> p = new HashMap<>();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    try (KafkaProducer<String, String> dlt =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      ExactlyOnceConsumer<String, String> a =
          ExactlyOnceConsumer.builder(
                  config("g4", 6_000), new StringDeserializer(), new StringDeserializer(), store)
              .topics(List.of("poison"))
              .maxAttempts(3)
              .maxBackoff(Duration.ofMillis(200))
              .deadLetters(DeadLetters.toTopic(dlt, "poison.DLT", Duration.ofSeconds(10)))
              .build();
      a.start();
      awaitCursors("g4", "poison", 1, 10);
      a.close();
      assertThat(attempts).hasValue(3);
      assertThat(a.stats().deadLettered()).isEqualTo(1);
      assertThat(ledgerOf("poison", 0)).containsExactly(0L, 1L, 2L, 4L, 5L, 6L, 7L, 8L, 9L);
    }
    Map<String, Object> c = config("dlt-reader", 6_000);
    try (KafkaConsumer<String, String> reader =
        new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
      reader.subscribe(List.of("poison.DLT"));
      List<ConsumerRecord<String, String>> got = new ArrayList<>();
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (got.isEmpty() && System.nanoTime() < until) {
        reader.poll(Duration.ofMillis(200)).forEach(got::add);
      }
      assertThat(got).hasSize(1);
      ConsumerRecord<String, String> d = got.get(0);
      assertThat(d.value()).isEqualTo("m3");
      assertThat(header(d, DeadLetters.OFFSET_HEADER)).isEqualTo("3");
      assertThat(header(d, DeadLetters.TOPIC_HEADER)).isEqualTo("poison");
      assertThat(header(d, DeadLetters.ATTEMPTS_HEADER)).isEqualTo("3");
      assertThat(header(d, DeadLetters.CAUSE_HEADER)).contains("cannot parse m3");
    }
  }

  private static String header(ConsumerRecord<String, String> r, String name) {
    return new String(r.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
  }
}
