package io.idem.kafka.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.kafka.RecordKeys;
import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyInProgressException;
import io.idem.keys.postgres.PostgresKeyStore;
import io.idem.keys.spi.Acquisition;
import io.idem.testkit.stores.PostgresServer;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The store on a real PostgreSQL server, driven directly with records built by hand (no broker).
 * The handler inserts one row per record into {@code applied}, which has no unique constraint: only
 * the store keeps a record from being applied twice. Each test has its own topic.
 */
@Timeout(120)
class PostgresReceiverStoreTest {
  final String group = "payments-" + UUID.randomUUID();
  static final long WAIT_S = 30;

  static PostgresServer server;
  static HikariDataSource pool;

  final String topic = "t-" + UUID.randomUUID();
  final TopicPartition tp = new TopicPartition(topic, 0);
  final List<PostgresReceiverStore<String, String>> stores = new ArrayList<>();

  /** Offsets at which the handler inserts its row, then throws. */
  final Map<Long, RuntimeException> failAt = new ConcurrentHashMap<>();

  final AtomicInteger handled = new AtomicInteger();

  /** The handler: one row per record (its offset, value and fencing token). */
  final PostgresRecordHandler<String, String> handler =
      (r, c, token) -> {
        handled.incrementAndGet();
        insert(c, r, token);
        RuntimeException e = failAt.get(r.offset());
        if (e != null) {
          throw e;
        }
      };

  @BeforeAll
  static void start() throws SQLException {
    server = PostgresServer.startFast();
    pool = server.pool(8, 2000);
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement()) {
      s.execute(
          "CREATE TABLE applied (topic text NOT NULL, partition integer NOT NULL,"
              + " off bigint NOT NULL, value text, token bigint NOT NULL)");
    }
  }

  @AfterAll
  static void stop() {
    if (pool != null) {
      pool.close();
    }
    if (server != null) {
      server.close();
    }
  }

  @AfterEach
  void closeStores() {
    stores.forEach(PostgresReceiverStore::close);
  }

  PostgresReceiverStore<String, String> store(
      PostgresRecordHandler<String, String> h, @Nullable RecordKeys<String, String> keys) {
    PostgresReceiverStore.Builder<String, String> b =
        PostgresReceiverStore.builder(pool, h).threads(4);
    if (keys != null) {
      b.recordKeys(keys);
    }
    PostgresReceiverStore<String, String> s = b.build();
    stores.add(s);
    s.migrate();
    return s;
  }

  @Test
  void aBatchCommitsWithItsOffsetAndANewerClaimFencesTheOldEpoch() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, null);
    assertThat(await(store.claim(group, tp))).isEqualTo(new PartitionClaim(1, -1));

    BatchOutcome out = await(store.process(group, tp, 1, records(0, 5)));

    assertThat(out).isEqualTo(new BatchOutcome.Committed(5, 0));
    assertThat(appliedOffsets()).containsExactly(0L, 1L, 2L, 3L, 4L);
    assertThat(tokens()).containsOnly(1L); // unkeyed: the claim's epoch
    assertThat(await(store.claim(group, tp))).isEqualTo(new PartitionClaim(2, 5));

    BatchOutcome late = await(store.process(group, tp, 1, records(5, 3)));

    assertThat(late).isEqualTo(new BatchOutcome.Fenced(5, 2));
    assertThat(appliedOffsets()).hasSize(5);
    assertThat(storedPosition()).isEqualTo(5);
    assertThat(await(store.skip(group, tp, 1, records(5, 1).get(0))))
        .isEqualTo(new BatchOutcome.Fenced(5, 2));
    assertThat(storedPosition()).isEqualTo(5);
  }

  @Test
  void aPartitionNeverClaimedIsFenced() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, null);

    assertThat(await(store.process(group, tp, 1, records(0, 2))))
        .isEqualTo(new BatchOutcome.Fenced(-1, 0));
    assertThat(appliedOffsets()).isEmpty();
  }

  @Test
  void aResendOfCommittedRecordsAppliesNothingTwice() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, null);
    long epoch = await(store.claim(group, tp)).epoch();
    await(store.process(group, tp, epoch, records(0, 5)));

    assertThat(await(store.process(group, tp, epoch, records(0, 5))))
        .isEqualTo(new BatchOutcome.Committed(5, 5));
    assertThat(await(store.process(group, tp, epoch, records(3, 4))))
        .isEqualTo(new BatchOutcome.Committed(7, 2));

    assertThat(appliedOffsets()).containsExactly(0L, 1L, 2L, 3L, 4L, 5L, 6L);
    assertThat(handled).hasValue(7);
    assertThat(storedPosition()).isEqualTo(7);
  }

  @Test
  void aFailingRecordStopsTheBatchThereAndNothingOfItLands() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, null);
    long epoch = await(store.claim(group, tp)).epoch();
    RuntimeException boom = new IllegalStateException("declined");
    failAt.put(2L, boom); // the third record writes its row, then throws

    BatchOutcome out = await(store.process(group, tp, epoch, records(0, 5)));

    assertThat(out).isEqualTo(new BatchOutcome.Stopped(2, 2, boom, true));
    assertThat(appliedOffsets()).containsExactly(0L, 1L);
    assertThat(storedPosition()).isEqualTo(2);
    // The records after it did not run; the two before it ran again in the transaction that
    // committed them without it.
    assertThat(handled).hasValue(5);

    failAt.clear();
    assertThat(await(store.process(group, tp, epoch, records(2, 3))))
        .isEqualTo(new BatchOutcome.Committed(5, 0));
    assertThat(appliedOffsets()).containsExactly(0L, 1L, 2L, 3L, 4L);
  }

  @Test
  void aHandlerThatEndsTheTransactionFailsTheStage() throws Exception {
    PostgresReceiverStore<String, String> store =
        store(
            (r, c, token) -> {
              insert(c, r, token);
              c.commit();
            },
            null);
    long epoch = await(store.claim(group, tp)).epoch();

    CompletableFuture<BatchOutcome> out =
        store.process(group, tp, epoch, records(0, 1)).toCompletableFuture();

    assertThatThrownBy(() -> out.get(WAIT_S, TimeUnit.SECONDS))
        .isInstanceOf(ExecutionException.class)
        .cause()
        .isInstanceOf(ReceiverStoreException.class);
    assertThat(storedPosition()).isEqualTo(-1);
  }

  @Test
  void aHandlerThatSwallowsAFailedStatementFailsItsRecordOnly() throws Exception {
    PostgresReceiverStore<String, String> store =
        store(
            (r, c, token) -> {
              insert(c, r, token);
              if (r.offset() == 1) {
                try (Statement s = c.createStatement()) {
                  s.execute("SELECT 1 / 0");
                } catch (SQLException swallowed) {
                  // the handler goes on in an aborted transaction
                }
              }
            },
            null);
    long epoch = await(store.claim(group, tp)).epoch();

    BatchOutcome out = await(store.process(group, tp, epoch, records(0, 3)));

    assertThat(out)
        .isInstanceOfSatisfying(
            BatchOutcome.Stopped.class,
            s -> {
              assertThat(s.position()).isEqualTo(1);
              assertThat(s.failedOffset()).isEqualTo(1);
              assertThat(s.attempt()).isTrue();
              assertThat(s.cause()).isInstanceOf(IllegalStateException.class);
            });
    assertThat(appliedOffsets()).containsExactly(0L);
    assertThat(storedPosition()).isEqualTo(1);
  }

  @Test
  void aRecordKeyAppliesAMessageProducedTwiceOnceAndSkipCompletesNoKey() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, RecordKeys.header("id"));
    long epoch = await(store.claim(group, tp)).epoch();
    List<ConsumerRecord<String, String>> batch = records(0, 3);
    withId(batch.get(0), "pay-1");
    withId(batch.get(1), "pay-1"); // the same message, produced again at another offset
    withId(batch.get(2), "pay-2");

    assertThat(await(store.process(group, tp, epoch, batch)))
        .isEqualTo(new BatchOutcome.Committed(3, 1));
    assertThat(appliedOffsets()).containsExactly(0L, 2L);
    assertThat(handled).hasValue(2);
    assertThat(tokens()).doesNotContainNull().allMatch(t -> t > 0).doesNotHaveDuplicates();

    // A third copy in a later batch is a duplicate too: the key committed with the first.
    ConsumerRecord<String, String> again = withId(records(3, 1).get(0), "pay-1");
    assertThat(await(store.process(group, tp, epoch, List.of(again))))
        .isEqualTo(new BatchOutcome.Committed(4, 1));

    ConsumerRecord<String, String> given = withId(records(4, 1).get(0), "pay-3");
    assertThat(await(store.skip(group, tp, epoch, given)))
        .isEqualTo(new BatchOutcome.Committed(5, 0));
    assertThat(appliedOffsets()).containsExactly(0L, 2L);
    assertThat(storedPosition()).isEqualTo(5);

    // The skipped record's key was not completed: another record with it applies.
    ConsumerRecord<String, String> later = withId(records(5, 1).get(0), "pay-3");
    assertThat(await(store.process(group, tp, epoch, List.of(later))))
        .isEqualTo(new BatchOutcome.Committed(6, 0));
    assertThat(appliedOffsets()).containsExactly(0L, 2L, 5L);
  }

  @Test
  void aKeyedRecordThatFailsLeavesItsKeyFree() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, RecordKeys.header("id"));
    long epoch = await(store.claim(group, tp)).epoch();
    RuntimeException boom = new IllegalStateException("declined");
    failAt.put(1L, boom);
    List<ConsumerRecord<String, String>> batch = records(0, 2);
    withId(batch.get(0), "pay-1");
    withId(batch.get(1), "pay-2");

    assertThat(await(store.process(group, tp, epoch, batch)))
        .isEqualTo(new BatchOutcome.Stopped(1, 1, boom, true));
    failAt.clear();
    assertThat(await(store.process(group, tp, epoch, batch.subList(1, 2))))
        .isEqualTo(new BatchOutcome.Committed(2, 0));
    assertThat(appliedOffsets()).containsExactly(0L, 1L);
  }

  @Test
  void aRecordWhoseKeyAnotherOwnerHoldsStopsTheBatchWithoutAnAttempt() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, RecordKeys.header("id"));
    try (PostgresKeyStore keys = PostgresKeyStore.builder(pool).purgeEvery(Duration.ZERO).build()) {
      Acquisition held =
          await(
              keys.acquire(
                  new IdempotencyKey("kafka/" + group, "pay-2"),
                  Fingerprint.none(),
                  Duration.ofMinutes(1),
                  Duration.ofHours(1)));
      assertThat(held).isInstanceOf(Acquisition.Acquired.class);
    }
    long epoch = await(store.claim(group, tp)).epoch();
    List<ConsumerRecord<String, String>> batch = records(0, 3);
    withId(batch.get(0), "pay-1");
    withId(batch.get(1), "pay-2");
    withId(batch.get(2), "pay-3");

    BatchOutcome out = await(store.process(group, tp, epoch, batch));

    assertThat(out)
        .isInstanceOfSatisfying(
            BatchOutcome.Stopped.class,
            s -> {
              assertThat(s.position()).isEqualTo(1);
              assertThat(s.failedOffset()).isEqualTo(1);
              assertThat(s.attempt()).isFalse();
              assertThat(s.cause()).isInstanceOf(KeyInProgressException.class);
            });
    assertThat(appliedOffsets()).containsExactly(0L);
    assertThat(handled).hasValue(2); // pay-1 ran again in the transaction that committed it
  }

  @Test
  void aClaimDuringABatchWaitsForItsCommit() throws Exception {
    CountDownLatch inside = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    PostgresReceiverStore<String, String> store =
        store(
            (r, c, token) -> {
              insert(c, r, token);
              if (r.offset() == 1) {
                inside.countDown();
                if (!release.await(WAIT_S, TimeUnit.SECONDS)) {
                  throw new IllegalStateException("never released");
                }
              }
            },
            null);
    long epoch = await(store.claim(group, tp)).epoch();
    CompletableFuture<BatchOutcome> batch =
        store.process(group, tp, epoch, records(0, 3)).toCompletableFuture();
    assertThat(inside.await(WAIT_S, TimeUnit.SECONDS)).isTrue();

    CompletableFuture<PartitionClaim> claim = store.claim(group, tp).toCompletableFuture();
    // The claim's statement waits on the batch's row lock: the server says so.
    awaitLockWaiter("INSERT INTO idem_kafka_offsets");
    assertThat(claim).isNotDone();
    release.countDown();

    assertThat(batch.get(WAIT_S, TimeUnit.SECONDS)).isEqualTo(new BatchOutcome.Committed(3, 0));
    // It saw the batch's committed position, not the one before it.
    assertThat(claim.get(WAIT_S, TimeUnit.SECONDS)).isEqualTo(new PartitionClaim(2, 3));
    assertThat(appliedOffsets()).containsExactly(0L, 1L, 2L);
  }

  @Test
  void aBatchRunsDurableAndUnderItsTimeoutsWhateverTheSessionSays() throws Exception {
    Map<String, String> seen = new ConcurrentHashMap<>();
    try (HikariDataSource own = server.pool(2, 2000)) {
      // Every connection of this data source has synchronous_commit off for its session.
      DataSource lax =
          (DataSource)
              Proxy.newProxyInstance(
                  DataSource.class.getClassLoader(),
                  new Class<?>[] {DataSource.class},
                  (proxy, method, args) -> {
                    Object out = method.invoke(own, args);
                    if (out instanceof Connection c) {
                      try (Statement s = c.createStatement()) {
                        s.execute("SET synchronous_commit = off");
                      }
                    }
                    return out;
                  });
      PostgresReceiverStore<String, String> store =
          PostgresReceiverStore.<String, String>builder(
                  lax,
                  (r, c, token) -> {
                    for (String name :
                        List.of("synchronous_commit", "statement_timeout", "lock_timeout")) {
                      try (Statement s = c.createStatement();
                          ResultSet rs = s.executeQuery("SHOW " + name)) {
                        rs.next();
                        seen.put(name, rs.getString(1));
                      }
                    }
                  })
              .statementTimeout(Duration.ofSeconds(7))
              .lockTimeout(Duration.ofSeconds(3))
              .build();
      stores.add(store);
      store.migrate();
      long epoch = await(store.claim(group, tp)).epoch();

      assertThat(await(store.process(group, tp, epoch, records(0, 1))))
          .isEqualTo(new BatchOutcome.Committed(1, 0));
      assertThat(seen)
          .containsEntry("synchronous_commit", "on")
          .containsEntry("statement_timeout", "7s")
          .containsEntry("lock_timeout", "3s");
    }
  }

  @Test
  void badArgumentsAndAClosedStoreFailTheStage() throws Exception {
    PostgresReceiverStore<String, String> store = store(handler, null);
    List<ConsumerRecord<String, String>> backwards = List.of(records(1, 1).get(0), record(0));

    assertThatThrownBy(() -> await(store.process(group, tp, 1, backwards)))
        .cause()
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ascend");
    store.close();
    assertThatThrownBy(() -> await(store.claim(group, tp)))
        .cause()
        .isInstanceOf(ReceiverStoreException.class)
        .hasMessageContaining("closed");
    assertThat(handled).hasValue(0);
  }

  // ---- fixtures ----

  static <T> T await(java.util.concurrent.CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
  }

  ConsumerRecord<String, String> record(long offset) {
    return new ConsumerRecord<>(topic, 0, offset, "k" + offset, "v" + offset);
  }

  List<ConsumerRecord<String, String>> records(long from, int n) {
    List<ConsumerRecord<String, String>> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(record(from + i));
    }
    return out;
  }

  static ConsumerRecord<String, String> withId(ConsumerRecord<String, String> r, String id) {
    r.headers().add("id", id.getBytes(StandardCharsets.UTF_8));
    return r;
  }

  static void insert(Connection c, ConsumerRecord<String, String> r, long token)
      throws SQLException {
    try (PreparedStatement s =
        c.prepareStatement(
            "INSERT INTO applied (topic, partition, off, value, token) VALUES (?, ?, ?, ?, ?)")) {
      s.setString(1, r.topic());
      s.setInt(2, r.partition());
      s.setLong(3, r.offset());
      s.setString(4, r.value());
      s.setLong(5, token);
      s.executeUpdate();
    }
  }

  List<Long> appliedOffsets() throws SQLException {
    return longs("SELECT off FROM applied WHERE topic = ? ORDER BY off, token");
  }

  List<Long> tokens() throws SQLException {
    return longs("SELECT token FROM applied WHERE topic = ? ORDER BY off");
  }

  long storedPosition() throws SQLException {
    List<Long> p =
        longs(
            "SELECT position FROM idem_kafka_offsets WHERE topic = ? AND consumer_group = '"
                + group
                + "'");
    assertThat(p).hasSize(1);
    return p.get(0);
  }

  private List<Long> longs(String sql) throws SQLException {
    try (Connection c = pool.getConnection();
        PreparedStatement s = c.prepareStatement(sql)) {
      s.setString(1, topic);
      List<Long> out = new ArrayList<>();
      try (ResultSet r = s.executeQuery()) {
        while (r.next()) {
          out.add(r.getLong(1));
        }
      }
      return out;
    }
  }

  /** Waits (bounded) until a backend running {@code queryStart}... waits on a lock. */
  static void awaitLockWaiter(String queryStart) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
    while (lockWaiters(queryStart) == 0) {
      if (System.nanoTime() - deadline > 0) {
        throw new AssertionError("no backend waited on a lock within " + WAIT_S + " s");
      }
      Thread.sleep(20);
    }
  }

  static long lockWaiters(String queryStart) throws SQLException {
    try (Connection c = pool.getConnection();
        PreparedStatement s =
            c.prepareStatement(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    + " AND query LIKE ?")) {
      s.setString(1, queryStart + "%");
      try (ResultSet r = s.executeQuery()) {
        r.next();
        return r.getLong(1);
      }
    }
  }
}
