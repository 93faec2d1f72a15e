package io.idem.testkit.stores;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Kafka broker launcher, with the real clients: a topic, records produced and consumed in a
 * group, a restart that keeps them, and that stop, kill and close leave no process or directory.
 */
@Tag("slow") // four broker starts and a restart: about a minute on two cores
@Timeout(300)
class KafkaBrokerTest {
  private static final String TOPIC = "events";

  @Test
  void aBrokerServesAGroupKeepsItsRecordsAcrossARestartAndLeavesNothingAfterClose()
      throws Exception {
    long t0 = System.nanoTime();
    KafkaBroker broker = KafkaBroker.builder().partitions(3).start();
    long startMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
    long pid = broker.pid();
    Path dir = broker.dir();
    try {
      System.out.printf(
          "kafka broker PID %d started in %d ms, RSS %s%n", pid, startMs, rss(pid).orElse("?"));
      try (Admin admin = admin(broker)) {
        admin
            .createTopics(List.of(new NewTopic(TOPIC, Optional.empty(), Optional.empty())))
            .all()
            .get(60, TimeUnit.SECONDS);
        assertThat(
                admin
                    .describeTopics(List.of(TOPIC))
                    .allTopicNames()
                    .get(60, TimeUnit.SECONDS)
                    .get(TOPIC)
                    .partitions())
            .hasSize(3); // num.partitions=3 from the builder
      }
      produce(broker, 0, 100);
      List<ConsumerRecord<String, String>> first = consume(broker, "g1", 100);
      assertThat(first)
          .extracting(ConsumerRecord::value)
          .containsExactlyInAnyOrderElementsOf(values(0, 100));
      assertThat(first).extracting(ConsumerRecord::partition).containsOnly(0, 1, 2);

      broker.restart();
      assertThat(broker.pid()).isNotEqualTo(pid);
      assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive)).isNotEqualTo(Optional.of(true));
      // What was produced before the restart is still there for a new group, and the broker takes
      // new records after it.
      produce(broker, 100, 1);
      List<ConsumerRecord<String, String>> again = consume(broker, "g2", 101);
      assertThat(again)
          .extracting(ConsumerRecord::value)
          .containsExactlyInAnyOrderElementsOf(values(0, 101));
      pid = broker.pid();
    } finally {
      broker.close();
    }
    assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive)).isNotEqualTo(Optional.of(true));
    assertThat(broker.isRunning()).isFalse();
    assertThat(Files.exists(dir)).isFalse();
  }

  @Test
  void aKilledBrokerIsGoneAndRestarts() throws Exception {
    try (KafkaBroker broker = KafkaBroker.start()) {
      long pid = broker.pid();
      broker.kill();
      assertThat(broker.isRunning()).isFalse();
      assertThat(ProcessHandle.of(pid).map(ProcessHandle::isAlive)).isNotEqualTo(Optional.of(true));
      broker.restart();
      assertThat(broker.isRunning()).isTrue();
      try (Admin admin = admin(broker)) {
        assertThat(admin.describeCluster().nodes().get(60, TimeUnit.SECONDS)).hasSize(1);
      }
    }
  }

  @Test
  void aBrokerDoesNotOutliveAJvmKilledWithSigkill() throws Exception {
    Process owner =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-D" + KafkaBroker.LIB_PROPERTY + "=" + KafkaBroker.defaultLib(),
                "-cp",
                System.getProperty("java.class.path"),
                KafkaBrokerOwner.class.getName())
            .redirectErrorStream(true)
            .start();
    Path dir = null;
    long broker = -1;
    try (BufferedReader out =
        new BufferedReader(new InputStreamReader(owner.getInputStream(), StandardCharsets.UTF_8))) {
      for (String line = out.readLine(); line != null; line = out.readLine()) {
        if (line.startsWith("broker ")) {
          String[] parts = line.split(" ", 3);
          broker = Long.parseLong(parts[1]);
          dir = Path.of(parts[2]);
          break;
        }
      }
      assertThat(broker).as("the owner JVM printed its broker's PID").isPositive();
      assertThat(ProcessHandle.of(broker).map(ProcessHandle::isAlive)).contains(true);
      owner.destroyForcibly(); // SIGKILL: no shutdown hook runs
      assertThat(owner.waitFor(30, TimeUnit.SECONDS)).isTrue();
      long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
      while (ProcessHandle.of(broker).map(ProcessHandle::isAlive).orElse(false)
          && System.nanoTime() < end) {
        Thread.sleep(100);
      }
      assertThat(ProcessHandle.of(broker).map(ProcessHandle::isAlive))
          .as("broker PID %d after its JVM was killed", broker)
          .isNotEqualTo(Optional.of(true));
    } finally {
      owner.destroyForcibly();
      if (broker > 0) {
        ProcessHandle.of(broker).ifPresent(ProcessHandle::destroyForcibly);
      }
      if (dir != null && Files.exists(dir)) {
        deleteTree(dir);
      }
    }
  }

  @Test
  void aBrokerThatCannotStartFailsWithItsLog() {
    assertThatThrownBy(() -> KafkaBroker.builder().property("node.id", "one").start())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("exited with")
        .hasMessageContaining("Invalid value one"); // the tail of the tool's log
  }

  @Test
  void noClusterIdStartsLikeAnOption() {
    // One random id in 64 began with '-', and StorageTool took it for an option.
    for (int i = 0; i < 10_000; i++) {
      assertThat(KafkaBroker.clusterId()).hasSize(22).doesNotStartWith("-");
    }
  }

  @Test
  void missingJarsAreNamedInTheError(@TempDir Path empty) {
    assertThatThrownBy(() -> KafkaBroker.builder().lib(empty).start())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(empty.toString())
        .hasMessageContaining("idem-kafka-broker");
    assertThatThrownBy(() -> KafkaBroker.builder().partitions(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("0");
  }

  private static void deleteTree(Path root) throws IOException {
    try (Stream<Path> all = Files.walk(root)) {
      all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  private static Admin admin(KafkaBroker broker) {
    return Admin.create(
        Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers()));
  }

  private static void produce(KafkaBroker broker, int from, int n) throws Exception {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 60_000);
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (String v : values(from, n)) {
        producer.send(new ProducerRecord<>(TOPIC, v, v)).get(60, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * Polls in group {@code group} from the earliest offsets until {@code n} distinct values came.
   */
  private static List<ConsumerRecord<String, String>> consume(
      KafkaBroker broker, String group, int n) {
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, group + "-" + UUID.randomUUID());
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    long end = System.nanoTime() + Duration.ofSeconds(120).toNanos();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
      consumer.subscribe(List.of(TOPIC));
      while (seen.size() < n && System.nanoTime() < end) {
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
          if (seen.add(r.value())) {
            got.add(r);
          }
        }
      }
      consumer.commitSync(Duration.ofSeconds(30));
    }
    assertThat(seen).as("values consumed in group %s:\n%s", group, broker.logTail()).hasSize(n);
    return got;
  }

  private static List<String> values(int from, int n) {
    List<String> v = new ArrayList<>();
    for (int i = from; i < from + n; i++) {
      v.add("v" + i);
    }
    return v;
  }

  /** The resident set size of {@code pid}, from /proc, or empty where there is none. */
  private static Optional<String> rss(long pid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
        if (line.startsWith("VmRSS:")) {
          return Optional.of(line.substring("VmRSS:".length()).trim());
        }
      }
    } catch (IOException e) {
      // not Linux
    }
    return Optional.empty();
  }
}
