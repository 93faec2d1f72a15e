package io.idem.kafka.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariDataSource;
import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.testkit.stores.PostgresServer;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An immediate shutdown of PostgreSQL (SIGQUIT) in the middle of a batch: the stage fails with
 * {@link ReceiverStoreException}, never a yes, and nothing of the batch was committed (no effect,
 * no offset); after the restart the batch applies once.
 */
@Timeout(180)
class ServerCrashTest {
  static final String GROUP = "crash";
  static final TopicPartition TP = new TopicPartition("payments", 0);

  PostgresServer server;
  HikariDataSource pool;
  final List<PostgresReceiverStore<String, String>> stores = new ArrayList<>();

  @BeforeEach
  void start() throws SQLException {
    server = PostgresServer.startFast();
    pool = server.pool(4, 1000);
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement()) {
      s.execute("CREATE TABLE applied (off bigint NOT NULL)");
    }
  }

  @AfterEach
  void stop() {
    stores.forEach(PostgresReceiverStore::close);
    pool.close();
    server.close();
  }

  @Test
  void aCrashMidBatchCommitsNothingAndFailsTheStage() throws Exception {
    AtomicBoolean crashAtTheThird = new AtomicBoolean(true);
    PostgresReceiverStore<String, String> store =
        PostgresReceiverStore.<String, String>builder(
                pool,
                (r, c, token) -> {
                  if (r.offset() == 2 && crashAtTheThird.getAndSet(false)) {
                    server.crash();
                  }
                  try (PreparedStatement s =
                      c.prepareStatement("INSERT INTO applied (off) VALUES (?)")) {
                    s.setLong(1, r.offset());
                    s.executeUpdate();
                  }
                })
            .statementTimeout(Duration.ofSeconds(2))
            .build();
    stores.add(store);
    store.migrate();
    assertThat(join(store.claim(GROUP, TP))).isEqualTo(new PartitionClaim(1, -1));

    assertStoreFailure(store.process(GROUP, TP, 1, records(0, 5)));
    // While it is down, every call fails the same way.
    assertStoreFailure(store.claim(GROUP, TP));
    assertStoreFailure(store.process(GROUP, TP, 1, records(0, 5)));
    assertStoreFailure(store.skip(GROUP, TP, 1, records(0, 1).get(0)));

    server.start();
    // The claim survived; the batch left nothing: no row, no position.
    assertThat(eventually(() -> store.claim(GROUP, TP))).isEqualTo(new PartitionClaim(2, -1));
    assertThat(applied()).isEmpty();
    assertThat(join(store.process(GROUP, TP, 2, records(0, 5))))
        .isEqualTo(new BatchOutcome.Committed(5, 0));
    assertThat(applied()).containsExactly(0L, 1L, 2L, 3L, 4L);
  }

  static List<ConsumerRecord<String, String>> records(long from, int n) {
    List<ConsumerRecord<String, String>> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(new ConsumerRecord<>(TP.topic(), TP.partition(), from + i, "k", "v" + i));
    }
    return out;
  }

  List<Long> applied() throws SQLException {
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement();
        ResultSet r = s.executeQuery("SELECT off FROM applied ORDER BY off")) {
      List<Long> out = new ArrayList<>();
      while (r.next()) {
        out.add(r.getLong(1));
      }
      return out;
    }
  }

  static <T> T join(CompletionStage<T> stage) throws Exception {
    return stage.toCompletableFuture().get(60, TimeUnit.SECONDS);
  }

  static void assertStoreFailure(CompletionStage<?> stage) {
    assertThatThrownBy(() -> join(stage))
        .isInstanceOf(ExecutionException.class)
        .cause()
        .isInstanceOf(ReceiverStoreException.class);
  }

  static <T> T eventually(Supplier<CompletionStage<T>> call) throws Exception {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (true) {
      try {
        return join(call.get());
      } catch (ExecutionException e) {
        assertThat(e).hasCauseInstanceOf(ReceiverStoreException.class);
        assertThat(System.nanoTime()).as("the store did not come back: %s", e).isLessThan(end);
        Thread.sleep(100);
      }
    }
  }
}
