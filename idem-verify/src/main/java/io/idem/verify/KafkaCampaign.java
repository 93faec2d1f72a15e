package io.idem.verify;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.kafka.postgres.PostgresReceiverStore;
import io.idem.testkit.stores.KafkaBroker;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
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

/**
 * The Kafka campaign ({@code idem verify --workload kafka}): a producer writes payment records into
 * several partitions of a topic on a real broker process, while consumer processes ({@link
 * KafkaWorker}) apply them to a ledger kept on Idem or on PostgreSQL, through the exactly-once
 * receiver. A seeded schedule kills consumers mid-batch (SIGKILL), pauses them past {@code
 * max.poll.interval.ms} (SIGSTOP, then SIGCONT, so that they commit after the rebalance), adds and
 * removes consumers (rebalances), restarts the broker, and injects the store's own faults (a kill
 * -9 of Idem's leader and lost responses; an immediate shutdown of PostgreSQL). Then the producer
 * stops, the consumers drain the topic without faults, and the checker reads the log, the ledger
 * and the stored offsets, and proves per partition:
 *
 * <ul>
 *   <li>every record's effect was applied exactly once ({@link Violation.Kind#DUPLICATE});
 *   <li>effects landed in offset order ({@link Violation.Kind#FIFO});
 *   <li>no effect without its offset: no ledger entry at or above the stored offset ({@link
 *       Violation.Kind#PHANTOM});
 *   <li>no offset without its effect: every record below the stored offset has its entry ({@link
 *       Violation.Kind#LOST}), and the stored offset reached the end of the log.
 * </ul>
 *
 * <p>The negative control ({@code plain}): the same work by a plain consumer that appends, then
 * commits Kafka's offsets after its batch; the checker must flag duplicates.
 */
public final class KafkaCampaign {

  /** The modes: the receiver on Idem, on PostgreSQL, and the negative control. */
  public static final List<String> MODES = List.of("idem", "postgres", "plain");

  static final String TOPIC = "payments";
  static final String GROUP = "ledger";

  private static final String KILL = "kill -9 consumer";
  private static final String PAUSE = "SIGSTOP consumer past max.poll.interval.ms";
  private static final String ADD = "consumer added";
  private static final String REMOVE = "consumer removed";
  private static final String BROKER = "broker restart";

  /**
   * What to run.
   *
   * @param seed the fault schedule's seed
   * @param duration how long the producer writes and faults are injected
   * @param mode {@code idem}, {@code postgres} or {@code plain} ({@link #MODES})
   * @param consumers consumer processes at the start
   * @param partitions the topic's partitions
   * @param rate records produced per second
   * @param accounts accounts the payments credit
   * @param faultEvery mean time between faults
   * @param sessionMs the consumers' session timeout and {@code max.poll.interval.ms}
   */
  public record Settings(
      long seed,
      Duration duration,
      String mode,
      int consumers,
      int partitions,
      int rate,
      int accounts,
      Duration faultEvery,
      int sessionMs) {
    public Settings {
      if (!MODES.contains(mode)) {
        throw new IllegalArgumentException("no mode " + mode + "; modes: " + MODES);
      }
      if (consumers < 2 || partitions < 1 || rate < 1 || accounts < 1 || sessionMs < 1_000) {
        throw new IllegalArgumentException(
            "at least 2 consumers, 1 partition, 1 record/s, 1 account and a 1 s session");
      }
      if (duration.isNegative() || duration.isZero() || faultEvery.toMillis() < 1) {
        throw new IllegalArgumentException("duration and faultEvery must be positive");
      }
    }

    /**
     * The ci profile: 3 consumers, 6 partitions, 200 records/s, a 2 s session, a fault every 1.5 s
     * on average, 25 s, and at least one round of every fault kind. The negative control's faults
     * are the consumers' kills and pauses, and its handler works on after the effects ({@link
     * KafkaWorker#PLAIN_HANDLER_MS}): a consumer killed while caught up redelivers nothing.
     */
    public static Settings ci(long seed, String mode) {
      return new Settings(
          seed, Duration.ofSeconds(25), mode, 3, 6, 200, 8, Duration.ofMillis(1_500), 2_000);
    }

    /** The same settings, running for {@code d}. */
    public Settings lasting(Duration d) {
      return new Settings(
          seed, d, mode, consumers, partitions, rate, accounts, faultEvery, sessionMs);
    }

    /** Whether the checker must flag this run. */
    public boolean expectsViolations() {
      return mode.equals("plain");
    }
  }

  /**
   * What a run found.
   *
   * @param seed the seed
   * @param mode the mode
   * @param records records in the log at the end
   * @param entries ledger entries at the end
   * @param faults faults injected, by kind
   * @param violations what the checker found
   * @param dir where the logs are
   */
  public record Report(
      long seed,
      String mode,
      long records,
      long entries,
      Map<String, Long> faults,
      List<Violation> violations,
      Path dir) {}

  private final Path dir;
  private final Settings s;
  private final Random random;
  private final Map<String, Long> faults = new TreeMap<>();
  private final List<Process> consumers = new ArrayList<>();
  // The negative control's consumers not yet seen working, with their logs; and those seen working.
  private final Map<Process, Path> starting = new HashMap<>();
  private final Set<Process> working = new HashSet<>();
  private int launched;

  private KafkaCampaign(Path dir, Settings s) {
    this.dir = dir;
    this.s = s;
    this.random = new Random(s.seed());
  }

  /** Runs a campaign in {@code dir} (created if needed). */
  public static Report run(Path dir, Settings s) throws Exception {
    Files.createDirectories(dir);
    return new KafkaCampaign(dir, s).run();
  }

  private Report run() throws Exception {
    PaymentStore store = PaymentStore.named(s.mode().equals("postgres") ? "postgres" : "idem");
    try (KafkaBroker broker =
            KafkaBroker.builder()
                .property("group.min.session.timeout.ms", "1000")
                .property("group.initial.rebalance.delay.ms", "0")
                .start();
        PaymentStore.Servers servers = store.start(dir.resolve("store"))) {
      createTopic(broker.bootstrapServers());
      if (s.mode().equals("postgres")) {
        prepare(servers.directAddress());
      }
      String address = servers.workerAddress();
      try {
        for (int i = 0; i < s.consumers(); i++) {
          startConsumer(address, broker.bootstrapServers());
        }
        AtomicBoolean producing = new AtomicBoolean(true);
        AtomicLong produced = new AtomicLong();
        Thread producer =
            new Thread(() -> produce(broker.bootstrapServers(), producing, produced), "producer");
        producer.start();
        long t0 = System.nanoTime();
        long end = t0 + s.duration().toNanos();
        try {
          injectFaults(broker, servers, address, end);
        } finally {
          producing.set(false);
          // The producer flushes (at most its delivery timeout) before the drain reads the log's
          // end: a batch still in its buffer would land after the consumers were judged drained.
          producer.join(60_000);
        }
        if (producer.isAlive()) {
          throw new IllegalStateException("the producer did not flush in 60 s");
        }
        long t1 = System.nanoTime();
        while (consumers.size() < 2) {
          startConsumer(address, broker.bootstrapServers());
        }
        drain(broker.bootstrapServers(), servers.directAddress(), Duration.ofSeconds(120));
        System.out.printf(
            "kafka campaign: %d records produced and faults injected in %.1f s, drained in %.1f"
                + " s%n",
            produced.get(), (t1 - t0) / 1e9, (System.nanoTime() - t1) / 1e9);
      } finally {
        for (Process p : consumers) {
          ProcessCluster.signal(p, "CONT");
          p.destroy();
        }
        for (Process p : consumers) {
          if (!p.waitFor(10, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
          }
        }
      }
      return check(broker.bootstrapServers(), servers.directAddress());
    }
  }

  private void createTopic(String bootstrap) throws Exception {
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      admin
          .createTopics(List.of(new NewTopic(TOPIC, s.partitions(), (short) 1)))
          .all()
          .get(60, TimeUnit.SECONDS);
    }
  }

  /** The PostgreSQL tables: the receiver's offsets, the ledger and the balances. */
  private static void prepare(String jdbcUrl) throws Exception {
    try (HikariDataSource pool = PostgresPayments.pool(jdbcUrl, 1, Duration.ofSeconds(10))) {
      PostgresReceiverStore.<String, String>builder(pool, KafkaWorker::insert).build().migrate();
      try (Connection c = pool.getConnection();
          Statement st = c.createStatement()) {
        st.execute(
            "CREATE TABLE IF NOT EXISTS kafka_ledger (seq bigserial PRIMARY KEY, topic text NOT"
                + " NULL, part integer NOT NULL, kafka_offset bigint NOT NULL, payment bigint NOT"
                + " NULL, account integer NOT NULL, amount bigint NOT NULL)");
        st.execute(
            "CREATE TABLE IF NOT EXISTS kafka_balances (account integer PRIMARY KEY, balance"
                + " bigint NOT NULL)");
      }
    }
  }

  private void startConsumer(String address, String bootstrap) {
    int n = launched++;
    Path log = dir.resolve("consumer-" + n + ".log");
    Process p =
        ProcessCluster.launch(
            List.of("-Xmx192m", "-XX:+UseSerialGC"),
            KafkaWorker.class.getName(),
            List.of(s.mode(), address, bootstrap, TOPIC, GROUP, Integer.toString(s.sessionMs())),
            log);
    consumers.add(p);
    starting.put(p, log);
  }

  /**
   * The consumer a kill or a pause hits. In the negative control, one that has applied a batch
   * (waiting up to 30 s for one): a consumer still starting (a JVM takes seconds here) redelivers
   * nothing when killed, and a run whose kills all hit those showed no duplicate.
   */
  private int target() throws Exception {
    if (!s.mode().equals("plain")) {
      return random.nextInt(consumers.size());
    }
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      List<Integer> ready = new ArrayList<>();
      for (int i = 0; i < consumers.size(); i++) {
        if (isWorking(consumers.get(i))) {
          ready.add(i);
        }
      }
      if (!ready.isEmpty() || System.nanoTime() > until) {
        return ready.isEmpty()
            ? random.nextInt(consumers.size())
            : ready.get(random.nextInt(ready.size()));
      }
      Thread.sleep(200);
    }
  }

  /**
   * Whether consumer {@code p} has printed {@link KafkaWorker#WORKING} (its log read until then).
   */
  private boolean isWorking(Process p) throws IOException {
    if (working.contains(p)) {
      return true;
    }
    Path log = starting.get(p);
    if (log == null
        || !Files.exists(log)
        || !new String(Files.readAllBytes(log), StandardCharsets.ISO_8859_1)
            .contains(KafkaWorker.WORKING)) {
      return false;
    }
    starting.remove(p);
    working.add(p);
    return true;
  }

  /** Writes records {@code id:account:amount} at the configured rate, partition id mod P. */
  private void produce(String bootstrap, AtomicBoolean producing, AtomicLong produced) {
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    // A batch that a broker restart left unresolved expires (and is not in the log) after this.
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 20_000);
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
    // While the broker restarts, a send waits at most this long, then the producer moves on: the
    // checker takes the log as it is, not what the producer meant to write.
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 2_000);
    Random amounts = new Random(s.seed() + 1);
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(p, new StringSerializer(), new StringSerializer())) {
      long start = System.nanoTime();
      long id = 0;
      while (producing.get()) {
        long due = start + id * 1_000_000_000L / s.rate();
        long wait = due - System.nanoTime();
        if (wait > 0) {
          TimeUnit.NANOSECONDS.sleep(wait);
        }
        int account = amounts.nextInt(s.accounts());
        int amount = 1 + amounts.nextInt(100);
        try {
          producer.send(
              new ProducerRecord<>(
                  TOPIC, (int) (id % s.partitions()), null, id + ":" + account + ":" + amount));
        } catch (org.apache.kafka.common.KafkaException e) {
          // the broker is restarting: this payment was not written; the next one may be
        }
        id++;
        produced.set(id);
      }
      producer.flush();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void injectFaults(
      KafkaBroker broker, PaymentStore.Servers servers, String address, long end) throws Exception {
    // The negative control needs only what makes a plain consumer redeliver: its own crashes and
    // pauses past max.poll.interval.ms.
    List<String> kinds =
        new ArrayList<>(
            s.mode().equals("plain")
                ? List.of(KILL, PAUSE)
                : List.of(KILL, PAUSE, ADD, REMOVE, BROKER));
    Map<String, PaymentStore.Fault> storeFaults = new HashMap<>();
    if (!s.mode().equals("plain")) {
      for (PaymentStore.Fault f : servers.faults()) {
        kinds.add(f.name());
        storeFaults.put(f.name(), f);
      }
    }
    List<String> round = new ArrayList<>();
    int rounds = 0;
    Thread.sleep(3_000); // let the consumers join
    // Until the end, and at least one whole round: a short run still has every kind of fault.
    while (System.nanoTime() < end || (rounds == 1 && !round.isEmpty())) {
      if (round.isEmpty()) {
        round.addAll(kinds);
        Collections.shuffle(round, random);
        rounds++;
      }
      String f = round.remove(round.size() - 1);
      int w = f.equals(KILL) || f.equals(PAUSE) ? target() : random.nextInt(consumers.size());
      long began = System.nanoTime();
      switch (f) {
        case KILL -> {
          consumers.get(w).destroyForcibly().waitFor(10, TimeUnit.SECONDS);
          consumers.remove(w);
          count(f);
          Thread.sleep(200 + random.nextInt(800));
          startConsumer(address, broker.bootstrapServers());
        }
        case PAUSE -> {
          Process p = consumers.get(w);
          ProcessCluster.signal(p, "STOP");
          count(f);
          Thread.sleep(s.sessionMs() + 2_000L + random.nextInt(1_000));
          ProcessCluster.signal(p, "CONT");
        }
        case ADD -> {
          startConsumer(address, broker.bootstrapServers());
          count(f);
        }
        case REMOVE -> {
          if (consumers.size() > 2) {
            Process p = consumers.remove(w);
            p.destroy(); // SIGTERM: a graceful leave
            if (!p.waitFor(15, TimeUnit.SECONDS)) {
              p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            }
            count(f);
          }
        }
        case BROKER -> {
          broker.restart();
          count(f);
        }
        default -> {
          if (storeFaults.get(f).injection().inject(random)) {
            count(f);
          }
        }
      }
      System.out.printf(
          "kafka campaign: %s took %d ms%n", f, (System.nanoTime() - began) / 1_000_000);
      long gap = (long) (s.faultEvery().toMillis() * (0.5 + random.nextDouble()));
      long left = (end - System.nanoTime()) / 1_000_000;
      Thread.sleep(Math.max(0, rounds == 1 && !round.isEmpty() ? gap : Math.min(gap, left)));
    }
  }

  private void count(String what) {
    faults.merge(what, 1L, Long::sum);
  }

  /** Waits, without faults, until every partition's stored offset reaches the log's end. */
  private void drain(String bootstrap, String storeAddress, Duration timeout) throws Exception {
    long until = System.nanoTime() + timeout.toNanos();
    Map<TopicPartition, Long> ends = endOffsets(bootstrap);
    while (System.nanoTime() < until) {
      Map<Integer, Long> positions = positions(bootstrap, storeAddress);
      boolean done = true;
      for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
        if (positions.getOrDefault(e.getKey().partition(), -1L) < e.getValue()) {
          done = false;
        }
      }
      if (done) {
        return;
      }
      Thread.sleep(500);
    }
    System.err.println("kafka campaign: the consumers did not drain the topic in " + timeout);
  }

  private Map<TopicPartition, Long> endOffsets(String bootstrap) throws Exception {
    try (Admin admin =
        Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
      Map<TopicPartition, OffsetSpec> q = new HashMap<>();
      for (int p = 0; p < s.partitions(); p++) {
        q.put(new TopicPartition(TOPIC, p), OffsetSpec.latest());
      }
      Map<TopicPartition, Long> out = new HashMap<>();
      admin
          .listOffsets(q)
          .all()
          .get(60, TimeUnit.SECONDS)
          .forEach((tp, info) -> out.put(tp, info.offset()));
      return out;
    }
  }

  /** The stored offset of each partition: the store's, or Kafka's for the negative control. */
  private Map<Integer, Long> positions(String bootstrap, String storeAddress) throws Exception {
    Map<Integer, Long> out = new HashMap<>();
    switch (s.mode()) {
      case "idem" -> {
        try (IdemClient c = IdemClient.builder().servers(storeAddress).build()) {
          for (int p = 0; p < s.partitions(); p++) {
            Optional<KeyValue> v = c.get("kafka/" + GROUP + "/" + TOPIC + "/" + p);
            if (v.isPresent()) {
              String text = v.get().valueAsString();
              out.put(p, Long.parseLong(text.substring(text.indexOf("position=") + 9)));
            }
          }
        }
      }
      case "postgres" -> {
        try (HikariDataSource pool =
                PostgresPayments.pool(storeAddress, 1, Duration.ofSeconds(10));
            Connection c = pool.getConnection();
            Statement st = c.createStatement();
            ResultSet rs =
                st.executeQuery(
                    "SELECT partition, position FROM idem_kafka_offsets WHERE consumer_group = '"
                        + GROUP
                        + "' AND topic = '"
                        + TOPIC
                        + "'")) {
          while (rs.next()) {
            out.put(rs.getInt(1), rs.getLong(2));
          }
        }
      }
      default -> {
        try (Admin admin =
            Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
          Map<TopicPartition, OffsetAndMetadata> committed =
              admin
                  .listConsumerGroupOffsets(GROUP)
                  .partitionsToOffsetAndMetadata()
                  .get(60, TimeUnit.SECONDS);
          committed.forEach((tp, o) -> out.put(tp.partition(), o.offset()));
        }
      }
    }
    return out;
  }

  /** One ledger entry: the offset it names, and the payment. */
  private record Entry(long offset, String payment) {}

  private Report check(String bootstrap, String storeAddress) throws Exception {
    Map<Integer, Map<Long, String>> log = readLog(bootstrap);
    Map<Integer, List<Entry>> ledger = ledger(storeAddress);
    Map<Integer, Long> positions = positions(bootstrap, storeAddress);
    List<Violation> violations = new ArrayList<>();
    long records = 0;
    long entries = 0;
    for (int p = 0; p < s.partitions(); p++) {
      Map<Long, String> records0 = log.getOrDefault(p, Map.of());
      records += records0.size();
      List<Entry> es = ledger.getOrDefault(p, List.of());
      entries += es.size();
      long position = positions.getOrDefault(p, -1L);
      Map<Long, Integer> seen = new HashMap<>();
      long last = -1;
      for (Entry e : es) {
        String where = TOPIC + "-" + p + "@" + e.offset();
        if (seen.merge(e.offset(), 1, Integer::sum) == 2) {
          violations.add(
              new Violation(Violation.Kind.DUPLICATE, where, "its effect was applied twice"));
        }
        if (e.offset() < last) {
          violations.add(
              new Violation(
                  Violation.Kind.FIFO, where, "its effect landed after that of offset " + last));
        }
        last = Math.max(last, e.offset());
        if (e.offset() >= position) {
          violations.add(
              new Violation(
                  Violation.Kind.PHANTOM,
                  where,
                  "an effect at or above the stored offset " + position));
        }
        String record = records0.get(e.offset());
        if (record == null || !record.equals(e.payment())) {
          violations.add(
              new Violation(
                  Violation.Kind.PHANTOM, where, "an effect of no such record: " + e.payment()));
        }
      }
      for (long offset : records0.keySet()) {
        if (offset < position && !seen.containsKey(offset)) {
          violations.add(
              new Violation(
                  Violation.Kind.LOST,
                  TOPIC + "-" + p + "@" + offset,
                  "below the stored offset " + position + " but without its effect"));
        }
      }
      long end = records0.keySet().stream().mapToLong(o -> o + 1).max().orElse(0);
      if (position < end) {
        violations.add(
            new Violation(
                Violation.Kind.LOST,
                TOPIC + "-" + p,
                "the stored offset " + position + " never reached the log's end " + end));
      }
    }
    return new Report(
        s.seed(), s.mode(), records, entries, Map.copyOf(faults), List.copyOf(violations), dir);
  }

  /** Every record of the topic: partition -> offset -> value. */
  private Map<Integer, Map<Long, String>> readLog(String bootstrap) {
    Map<String, Object> c = new HashMap<>();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    Map<Integer, Map<Long, String>> out = new HashMap<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> tps = new ArrayList<>();
      for (int p = 0; p < s.partitions(); p++) {
        tps.add(new TopicPartition(TOPIC, p));
      }
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> ends = consumer.endOffsets(tps);
      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
      while (System.nanoTime() < until) {
        boolean done = true;
        for (TopicPartition tp : tps) {
          if (consumer.position(tp) < ends.get(tp)) {
            done = false;
          }
        }
        if (done) {
          break;
        }
        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
          out.computeIfAbsent(r.partition(), k -> new TreeMap<>()).put(r.offset(), r.value());
        }
      }
    }
    return out;
  }

  /** The ledger's entries per partition, in the order they landed. */
  private Map<Integer, List<Entry>> ledger(String storeAddress) throws Exception {
    Map<Integer, List<Entry>> out = new HashMap<>();
    if (s.mode().equals("postgres")) {
      try (HikariDataSource pool = PostgresPayments.pool(storeAddress, 1, Duration.ofSeconds(10));
          Connection c = pool.getConnection();
          Statement st = c.createStatement();
          ResultSet rs =
              st.executeQuery(
                  "SELECT part, kafka_offset, payment, account, amount FROM kafka_ledger ORDER BY"
                      + " seq")) {
        while (rs.next()) {
          out.computeIfAbsent(rs.getInt(1), k -> new ArrayList<>())
              .add(
                  new Entry(
                      rs.getLong(2), rs.getLong(3) + ":" + rs.getInt(4) + ":" + rs.getLong(5)));
        }
      }
      return out;
    }
    try (IdemClient c = IdemClient.builder().servers(storeAddress).build()) {
      for (int p = 0; p < s.partitions(); p++) {
        Optional<KeyValue> v = c.get(KafkaWorker.ledgerKey(TOPIC, p));
        if (v.isEmpty()) {
          continue;
        }
        List<Entry> es = new ArrayList<>();
        for (byte[] element : v.get().elements()) {
          String e = new String(element, StandardCharsets.UTF_8);
          int colon = e.indexOf(':');
          es.add(new Entry(Long.parseLong(e.substring(0, colon)), e.substring(colon + 1)));
        }
        out.put(p, es);
      }
    }
    return out;
  }
}
