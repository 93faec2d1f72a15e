package io.idem.verify;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.client.IdemClient;
import io.idem.client.Write;
import io.idem.kafka.ExactlyOnceConsumer;
import io.idem.kafka.idem.IdemReceiverStore;
import io.idem.kafka.postgres.PostgresReceiverStore;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * One consumer process of the Kafka campaign ({@link KafkaCampaign}): it applies payment records to
 * a store until SIGTERM (a graceful leave, which rebalances the group) or SIGKILL. A record's value
 * is {@code id:account:amount}; its effect is one ledger entry {@code offset:id:account:amount} per
 * record, in a per-partition ledger, which the checker reads.
 *
 * <ul>
 *   <li>{@code idem}: {@link ExactlyOnceConsumer} over {@link IdemReceiverStore}; the entry is an
 *       append to the list {@code kledger/<topic>/<partition>}, committed with the cursor.
 *   <li>{@code postgres}: {@link ExactlyOnceConsumer} over {@link PostgresReceiverStore}; the entry
 *       is a row of {@code kafka_ledger} plus the account's balance in {@code kafka_balances},
 *       inserted in the batch's transaction.
 *   <li>{@code plain}: the negative control, what teams write by hand: a plain consumer that makes
 *       the same Idem append, then commits Kafka's offsets after the batch.
 * </ul>
 *
 * <p>Arguments: mode, store address (Idem servers or a JDBC URL), bootstrap servers, topic, group,
 * session timeout in ms (also {@code max.poll.interval.ms}).
 */
final class KafkaWorker {
  private KafkaWorker() {}

  /** How long the negative control's handler works after a batch's effects, before its commit. */
  static final long PLAIN_HANDLER_MS = 150;

  /** What the negative control prints once it has applied its first batch. */
  static final String WORKING = "kafka worker: working";

  /** The ledger list of a partition on Idem. */
  static String ledgerKey(String topic, int partition) {
    return "kledger/" + topic + "/" + partition;
  }

  /** A record's ledger entry. */
  static String entry(ConsumerRecord<String, String> r) {
    return r.offset() + ":" + r.value();
  }

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    String store = args[1];
    String bootstrap = args[2];
    String topic = args[3];
    String group = args[4];
    int sessionMs = Integer.parseInt(args[5]);
    Map<String, Object> config = new HashMap<>();
    config.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    config.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    config.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    config.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, sessionMs);
    config.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, Math.max(100, sessionMs / 4));
    config.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, sessionMs);
    config.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 200);
    config.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    switch (mode) {
      case "idem" -> runIdem(store, config, topic);
      case "postgres" -> runPostgres(store, config, topic);
      case "plain" -> runPlain(store, config, topic);
      default -> throw new IllegalArgumentException("no mode " + mode);
    }
  }

  private static void runIdem(String servers, Map<String, Object> config, String topic)
      throws InterruptedException {
    try (IdemClient client =
        IdemClient.builder().servers(servers).requestTimeout(Duration.ofSeconds(20)).build()) {
      IdemReceiverStore<String, String> store =
          IdemReceiverStore.<String, String>builder(
                  client,
                  (r, token) ->
                      Write.append(
                          ledgerKey(r.topic(), r.partition()),
                          entry(r).getBytes(StandardCharsets.UTF_8)))
              .build();
      runUntilTerm(
          ExactlyOnceConsumer.builder(
                  config, new StringDeserializer(), new StringDeserializer(), store)
              .topics(List.of(topic))
              .storeTimeout(Duration.ofSeconds(10))
              .build());
    }
  }

  private static void runPostgres(String jdbcUrl, Map<String, Object> config, String topic)
      throws InterruptedException {
    try (HikariDataSource pool = PostgresPayments.pool(jdbcUrl, 4, Duration.ofSeconds(5));
        PostgresReceiverStore<String, String> store =
            PostgresReceiverStore.<String, String>builder(pool, KafkaWorker::insert).build()) {
      runUntilTerm(
          ExactlyOnceConsumer.builder(
                  config, new StringDeserializer(), new StringDeserializer(), store)
              .topics(List.of(topic))
              .storeTimeout(Duration.ofSeconds(10))
              .build());
    }
  }

  /** The PostgreSQL effect: the ledger row and the balance, in the batch's transaction. */
  static void insert(ConsumerRecord<String, String> r, Connection c, long token) throws Exception {
    String[] f = r.value().split(":");
    try (PreparedStatement ins =
            c.prepareStatement(
                "INSERT INTO kafka_ledger (topic, part, kafka_offset, payment, account, amount)"
                    + " VALUES (?, ?, ?, ?, ?, ?)");
        PreparedStatement bal =
            c.prepareStatement(
                "INSERT INTO kafka_balances (account, balance) VALUES (?, ?) ON CONFLICT"
                    + " (account) DO UPDATE SET balance = kafka_balances.balance +"
                    + " EXCLUDED.balance")) {
      ins.setString(1, r.topic());
      ins.setInt(2, r.partition());
      ins.setLong(3, r.offset());
      ins.setLong(4, Long.parseLong(f[0]));
      ins.setInt(5, Integer.parseInt(f[1]));
      ins.setLong(6, Long.parseLong(f[2]));
      ins.executeUpdate();
      bal.setInt(1, Integer.parseInt(f[1]));
      bal.setLong(2, Long.parseLong(f[2]));
      bal.executeUpdate();
    }
  }

  /** Runs the consumer until SIGTERM (the JVM's shutdown hook closes it: a graceful leave). */
  private static void runUntilTerm(ExactlyOnceConsumer<String, String> consumer)
      throws InterruptedException {
    // close() wakes the loop, which leaves the group and closes the Kafka consumer, and waits for
    // it.
    Runtime.getRuntime().addShutdownHook(new Thread(consumer::close));
    consumer.start();
    while (true) {
      Thread.sleep(5_000);
      System.out.println("kafka worker: " + consumer.stats());
    }
  }

  /**
   * The negative control: effects as plain appends, then Kafka's offsets committed after the batch.
   * A crash or a lost partition between the two redelivers records whose effect landed. After its
   * effects, a batch's handler works {@link #PLAIN_HANDLER_MS} more (a call to another service,
   * say) before the commit, so most kills and pauses fall between the two: with a handler that
   * returns at once, a run of 25 s once got no duplicate, as a consumer killed while caught up
   * redelivers nothing.
   */
  private static void runPlain(String servers, Map<String, Object> config, String topic)
      throws InterruptedException {
    try (IdemClient client =
            IdemClient.builder().servers(servers).requestTimeout(Duration.ofSeconds(20)).build();
        KafkaConsumer<String, String> consumer =
            new KafkaConsumer<>(config, new StringDeserializer(), new StringDeserializer())) {
      Runtime.getRuntime().addShutdownHook(new Thread(consumer::wakeup));
      consumer.subscribe(List.of(topic));
      boolean working = false;
      while (true) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        List<CompletableFuture<Long>> appends = new ArrayList<>();
        for (ConsumerRecord<String, String> r : records) {
          appends.add(
              client.appendAsync(
                  ledgerKey(r.topic(), r.partition()), entry(r).getBytes(StandardCharsets.UTF_8)));
          offsets.put(
              new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
        }
        // Every effect of the batch, then the rest of the handler's work, then the offsets:
        // commit-after-processing.
        CompletableFuture.allOf(appends.toArray(CompletableFuture[]::new)).join();
        if (!offsets.isEmpty()) {
          if (!working) {
            System.out.println(WORKING);
            working = true;
          }
          Thread.sleep(PLAIN_HANDLER_MS);
          try {
            consumer.commitSync(offsets);
          } catch (RuntimeException lost) {
            // CommitFailedException after a rebalance: the records go to the next owner again.
            System.out.println("kafka worker: commit failed: " + lost);
          }
        }
      }
    } catch (WakeupException e) {
      // SIGTERM
    }
  }
}
