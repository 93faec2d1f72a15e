package io.idem.verify;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.client.IdemClient;
import io.idem.client.Write;
import io.idem.kafka.ExactlyOnceConsumer;
import io.idem.kafka.idem.IdemReceiverStore;
import io.idem.kafka.postgres.PostgresReceiverStore;
import io.idem.testkit.stores.KafkaBroker;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Records per second through one exactly-once consumer, on each store, beside the pattern teams
 * hand-roll today, in one sitting ({@code idem bench-kafka}). One broker process, three Idem server
 * processes and one PostgreSQL (fsync on) serve every run; the topic is written once, and each run
 * reads it whole with a new consumer group, so every run does the same work:
 *
 * <ul>
 *   <li>{@code idem}: {@link ExactlyOnceConsumer} over {@link IdemReceiverStore}; a record's effect
 *       is an increment of its account's balance, in the batch's log command with the offset.
 *   <li>{@code postgres}: {@link ExactlyOnceConsumer} over {@link PostgresReceiverStore}; the
 *       effect is an upsert of the balance row, in the batch's transaction with the offset.
 *   <li>{@code inbox}: a plain consumer with an inbox table: per poll, one transaction that inserts
 *       each record's id into the inbox ({@code ON CONFLICT DO NOTHING}) and, if new, upserts the
 *       balance; then Kafka's offsets are committed. This is the strongest form of the pattern (one
 *       transaction per poll, not per record).
 * </ul>
 *
 * <p>Runs alternate the stores round by round, so a drift of the machine touches each alike.
 */
public final class KafkaReceiverBench {

  /** The stores a run can use, in the order a round runs them. */
  public static final List<String> STORES = List.of("idem", "postgres", "inbox");

  private static final String TOPIC = "bench";

  /**
   * What to run.
   *
   * @param records records in the topic
   * @param partitions the topic's partitions
   * @param accounts accounts the records credit
   * @param rounds how many times each store runs
   * @param stores which stores, of {@link #STORES}
   * @param maxPollRecords the consumers' {@code max.poll.records}
   */
  public record Settings(
      int records,
      int partitions,
      int accounts,
      int rounds,
      List<String> stores,
      int maxPollRecords) {
    public Settings {
      if (records < 1 || partitions < 1 || accounts < 1 || rounds < 1 || maxPollRecords < 1) {
        throw new IllegalArgumentException("records, partitions, accounts, rounds must be >= 1");
      }
      if (stores.isEmpty() || !STORES.containsAll(stores)) {
        throw new IllegalArgumentException("stores must be among " + STORES + ", got " + stores);
      }
      stores = List.copyOf(stores);
    }
  }

  /** One run: a store, and the records per second its consumer reached. */
  public record Run(String store, int round, long records, double seconds) {
    public double perSecond() {
      return records / seconds;
    }
  }

  private KafkaReceiverBench() {}

  /** Runs the bench in {@code dir}, printing each run to {@code out}; returns the runs. */
  public static List<Run> run(Path dir, Settings s, PrintWriter out) throws Exception {
    Files.createDirectories(dir);
    List<Run> runs = new ArrayList<>();
    try (KafkaBroker broker =
            KafkaBroker.builder()
                .heap("512m")
                .property("group.initial.rebalance.delay.ms", "0")
                .start();
        PaymentStore.Servers idem = PaymentStore.named("idem").start(dir.resolve("idem"));
        PaymentStore.Servers pg = PaymentStore.named("postgres").start(dir.resolve("pg"))) {
      String bootstrap = broker.bootstrapServers();
      produce(bootstrap, s);
      out.printf(
          "kafka receiver bench: %,d records in %d partitions, %d accounts, max.poll.records %d%n",
          s.records(), s.partitions(), s.accounts(), s.maxPollRecords());
      try (HikariDataSource pool =
              PostgresPayments.pool(pg.directAddress(), 8, Duration.ofSeconds(10));
          IdemClient client = IdemClient.builder().servers(idem.directAddress()).build()) {
        prepare(pool);
        for (int round = 1; round <= s.rounds(); round++) {
          for (String store : s.stores()) {
            String group = store + "-" + round;
            Run r =
                switch (store) {
                  case "idem" -> receiver(s, bootstrap, group, round, idemStore(client));
                  case "postgres" -> receiver(s, bootstrap, group, round, pgStore(pool));
                  default -> inbox(s, bootstrap, group, round, pool);
                };
            out.printf(
                "round %d  %-9s %,9d records in %6.2f s  %,10.0f records/s%n",
                round, store, r.records(), r.seconds(), r.perSecond());
            out.flush();
            runs.add(r);
          }
        }
      }
    }
    return runs;
  }

  private static IdemReceiverStore<String, String> idemStore(IdemClient client) {
    return IdemReceiverStore.<String, String>builder(
            client, (r, token) -> Write.increment("kbal/" + account(r), amount(r)))
        .build();
  }

  private static PostgresReceiverStore<String, String> pgStore(HikariDataSource pool) {
    return PostgresReceiverStore.<String, String>builder(
            pool,
            (r, c, token) -> {
              try (PreparedStatement bal = c.prepareStatement(UPSERT)) {
                bal.setInt(1, account(r));
                bal.setLong(2, amount(r));
                bal.executeUpdate();
              }
            })
        .build();
  }

  private static final String UPSERT =
      "INSERT INTO kbench_balances (account, balance) VALUES (?, ?) ON CONFLICT (account) DO"
          + " UPDATE SET balance = kbench_balances.balance + EXCLUDED.balance";

  private static int account(ConsumerRecord<String, String> r) {
    return Integer.parseInt(r.value().substring(0, r.value().indexOf(':')));
  }

  private static long amount(ConsumerRecord<String, String> r) {
    return Long.parseLong(r.value().substring(r.value().indexOf(':') + 1));
  }

  private static void prepare(HikariDataSource pool) throws Exception {
    pgStore(pool).migrate();
    try (Connection c = pool.getConnection();
        Statement st = c.createStatement()) {
      st.execute(
          "CREATE TABLE IF NOT EXISTS kbench_balances (account integer PRIMARY KEY, balance bigint"
              + " NOT NULL)");
      st.execute("CREATE TABLE IF NOT EXISTS kbench_inbox (id text PRIMARY KEY)");
    }
  }

  private static void produce(String bootstrap, Settings s) throws Exception {
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      admin
          .createTopics(List.of(new NewTopic(TOPIC, s.partitions(), (short) 1)))
          .all()
          .get(60, TimeUnit.SECONDS);
    }
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, 10);
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < s.records(); i++) {
        producer.send(
            new ProducerRecord<>(
                TOPIC, i % s.partitions(), null, (i % s.accounts()) + ":" + (1 + i % 100)));
      }
      producer.flush();
    }
  }

  private static Map<String, Object> config(Settings s, String bootstrap, String group) {
    Map<String, Object> c = new HashMap<>();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, s.maxPollRecords());
    return c;
  }

  private static Run receiver(
      Settings s,
      String bootstrap,
      String group,
      int round,
      io.idem.kafka.spi.ReceiverStore<String, String> store)
      throws Exception {
    ExactlyOnceConsumer<String, String> consumer =
        ExactlyOnceConsumer.builder(
                config(s, bootstrap, group),
                new StringDeserializer(),
                new StringDeserializer(),
                store)
            .topics(List.of(TOPIC))
            .build();
    long start = System.nanoTime();
    consumer.start();
    long until = start + TimeUnit.MINUTES.toNanos(10);
    while (consumer.stats().applied() < s.records() && System.nanoTime() < until) {
      Thread.sleep(5);
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    long applied = consumer.stats().applied();
    consumer.close();
    if (store instanceof AutoCloseable c) {
      c.close();
    }
    if (applied < s.records()) {
      throw new IllegalStateException(
          group + " applied " + applied + " of " + s.records() + " records in 10 minutes");
    }
    return new Run(group.substring(0, group.indexOf('-')), round, applied, seconds);
  }

  /** The hand-rolled pattern: an inbox table, one transaction per poll, then Kafka's commit. */
  private static Run inbox(
      Settings s, String bootstrap, String group, int round, HikariDataSource pool)
      throws Exception {
    long start = System.nanoTime();
    long applied = 0;
    try (KafkaConsumer<String, String> consumer =
            new KafkaConsumer<>(
                config(s, bootstrap, group), new StringDeserializer(), new StringDeserializer());
        Connection c = pool.getConnection()) {
      consumer.subscribe(List.of(TOPIC));
      c.setAutoCommit(false);
      long until = start + TimeUnit.MINUTES.toNanos(10);
      try (PreparedStatement ins =
              c.prepareStatement(
                  "INSERT INTO kbench_inbox (id) VALUES (?) ON CONFLICT DO NOTHING");
          PreparedStatement bal = c.prepareStatement(UPSERT)) {
        while (applied < s.records() && System.nanoTime() < until) {
          ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
          if (records.isEmpty()) {
            continue;
          }
          Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
          for (ConsumerRecord<String, String> r : records) {
            ins.setString(1, group + "/" + r.topic() + "/" + r.partition() + "/" + r.offset());
            if (ins.executeUpdate() == 1) {
              bal.setInt(1, account(r));
              bal.setLong(2, amount(r));
              bal.executeUpdate();
            }
            offsets.put(
                new TopicPartition(r.topic(), r.partition()),
                new OffsetAndMetadata(r.offset() + 1));
            applied++;
          }
          c.commit();
          consumer.commitSync(offsets);
        }
      }
    }
    double seconds = (System.nanoTime() - start) / 1e9;
    return new Run("inbox", round, applied, seconds);
  }
}
