package io.idem.kafka.idem;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.Write;
import io.idem.kafka.RecordKeys;
import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Idem-backed receiver store on a real three-node cluster, driven with records built by hand
 * (no broker): claims fence, batches commit effect and offset together, failures stop a batch at
 * their record, keyed duplicates count once.
 */
@Timeout(120)
class IdemReceiverStoreTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static IdemClient client;

  @BeforeAll
  static void start() throws Exception {
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
  }

  private static List<ConsumerRecord<String, String>> records(
      String topic, long from, int n, String... headerKeys) {
    List<ConsumerRecord<String, String>> out = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      RecordHeaders h = new RecordHeaders();
      if (i < headerKeys.length && headerKeys[i] != null) {
        h.add("msg-id", headerKeys[i].getBytes(StandardCharsets.UTF_8));
      }
      out.add(
          new ConsumerRecord<>(
              topic,
              0,
              from + i,
              0L,
              TimestampType.CREATE_TIME,
              0,
              0,
              "k" + (from + i),
              "acct-" + ((from + i) % 2) + ":" + (from + i),
              h,
              java.util.Optional.empty()));
    }
    return out;
  }

  /** Adds the record's offset + 1 to its account's balance. */
  private static Write credit(ConsumerRecord<String, String> r) {
    String acct = r.value().substring(0, r.value().indexOf(':'));
    return Write.increment("bal/" + r.topic() + "/" + acct, r.offset() + 1);
  }

  private static long balance(String topic, String acct) {
    return client
        .get("bal/" + topic + "/" + acct)
        .map(KeyValue::valueAsString)
        .map(Long::parseLong)
        .orElse(0L);
  }

  private static <T> T get(java.util.concurrent.CompletionStage<T> s) throws Exception {
    return s.toCompletableFuture().get(30, TimeUnit.SECONDS);
  }

  @Test
  void aBatchCommitsEffectsWithTheOffsetAndALaterClaimFencesTheEarlierOwner() throws Exception {
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(client, (r, token) -> credit(r)).build();
    TopicPartition tp = new TopicPartition("t1", 0);
    PartitionClaim first = get(store.claim("g", tp));
    assertThat(first).isEqualTo(new PartitionClaim(1, -1));
    BatchOutcome o = get(store.process("g", tp, first.epoch(), records("t1", 0, 4)));
    assertThat(o).isEqualTo(new BatchOutcome.Committed(4, 0));
    assertThat(balance("t1", "acct-0")).isEqualTo(1 + 3);
    assertThat(balance("t1", "acct-1")).isEqualTo(2 + 4);

    // A resend of the same batch: nothing twice.
    assertThat(get(store.process("g", tp, first.epoch(), records("t1", 0, 4))))
        .isEqualTo(new BatchOutcome.Committed(4, 0));
    assertThat(balance("t1", "acct-0")).isEqualTo(4);

    PartitionClaim second = get(store.claim("g", tp));
    assertThat(second).isEqualTo(new PartitionClaim(2, 4));
    BatchOutcome late = get(store.process("g", tp, first.epoch(), records("t1", 4, 2)));
    assertThat(late).isEqualTo(new BatchOutcome.Fenced(4, 2));
    assertThat(balance("t1", "acct-0")).isEqualTo(4);
    assertThat(client.get(store.cursorKey("g", tp)).map(KeyValue::valueAsString))
        .hasValue("idem-cursor epoch=2 position=4");
  }

  @Test
  void aFailingHandlerStopsTheBatchAtItsRecordAfterCommittingTheOnesBefore() throws Exception {
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(
                client,
                (r, token) -> {
                  if (r.offset() == 12) {
                    throw new IllegalStateException("poison");
                  }
                  return credit(r);
                })
            .maxStepsPerCommit(2) // the five records go in chunks, one after the other
            .build();
    TopicPartition tp = new TopicPartition("t2", 0);
    long epoch = get(store.claim("g", tp)).epoch();
    BatchOutcome o = get(store.process("g", tp, epoch, records("t2", 10, 5)));
    assertThat(o).isInstanceOf(BatchOutcome.Stopped.class);
    BatchOutcome.Stopped s = (BatchOutcome.Stopped) o;
    assertThat(s.position()).isEqualTo(12);
    assertThat(s.failedOffset()).isEqualTo(12);
    assertThat(s.attempt()).isTrue();
    assertThat(s.cause()).hasMessage("poison");
    assertThat(balance("t2", "acct-0")).isEqualTo(11); // offset 10 only
    assertThat(balance("t2", "acct-1")).isEqualTo(12); // offset 11 only

    // Dead-lettered: skipped with no effect, and the rest goes on.
    assertThat(get(store.skip("g", tp, epoch, records("t2", 12, 1).get(0))).position())
        .isEqualTo(13);
    assertThat(get(store.process("g", tp, epoch, records("t2", 13, 2))))
        .isEqualTo(new BatchOutcome.Committed(15, 0));
    assertThat(balance("t2", "acct-0")).isEqualTo(11 + 15);
    assertThat(balance("t2", "acct-1")).isEqualTo(12 + 14);
  }

  @Test
  void aRefusedEffectStopsTheBatchAndCountsAsAnAttempt() throws Exception {
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(
                client,
                (r, token) ->
                    r.offset() == 1 ? Write.compareAndSet("t3/cas", 42, new byte[] {1}) : credit(r))
            .build();
    TopicPartition tp = new TopicPartition("t3", 0);
    long epoch = get(store.claim("g", tp)).epoch();
    BatchOutcome o = get(store.process("g", tp, epoch, records("t3", 0, 3)));
    assertThat(o).isInstanceOf(BatchOutcome.Stopped.class);
    assertThat(((BatchOutcome.Stopped) o).failedOffset()).isEqualTo(1);
    assertThat(((BatchOutcome.Stopped) o).attempt()).isTrue();
    assertThat(o.position()).isEqualTo(1);
    assertThat(balance("t3", "acct-0")).isEqualTo(1);
    assertThat(balance("t3", "acct-1")).isZero();
  }

  @Test
  void aMessageProducedTwiceCountsOnceByItsHeaderKey() throws Exception {
    AtomicInteger calls = new AtomicInteger();
    List<Long> tokens = new ArrayList<>();
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(
                client,
                (r, token) -> {
                  calls.incrementAndGet();
                  tokens.add(token);
                  return Write.increment("t4/count", 1);
                })
            .recordKeys(RecordKeys.header("msg-id"))
            .build();
    TopicPartition tp = new TopicPartition("t4", 0);
    long epoch = get(store.claim("g", tp)).epoch();
    // m-1 twice in one batch, m-2 once, a record without the header.
    BatchOutcome o =
        get(store.process("g", tp, epoch, records("t4", 0, 4, "m-1", "m-2", "m-1", null)));
    assertThat(o).isEqualTo(new BatchOutcome.Committed(4, 1));
    // m-2 again, in a later batch: found completed.
    BatchOutcome again = get(store.process("g", tp, epoch, records("t4", 4, 1, "m-2")));
    assertThat(again).isEqualTo(new BatchOutcome.Committed(5, 1));
    assertThat(calls.get()).isEqualTo(3);
    assertThat(client.get("t4/count").map(KeyValue::valueAsString)).hasValue("3");
    // Keyed records carry their key's token; the unkeyed one the claim's epoch.
    assertThat(tokens.get(0)).isGreaterThan(epoch);
    assertThat(tokens.get(2)).isEqualTo(epoch);
  }

  @Test
  void anUnknownPartitionCommitIsFencedAndAppliesNothing() throws Exception {
    IdemReceiverStore<String, String> store =
        IdemReceiverStore.<String, String>builder(client, (r, token) -> credit(r)).build();
    TopicPartition tp = new TopicPartition("t5", 0);
    BatchOutcome o = get(store.process("g", tp, 1, records("t5", 0, 2)));
    assertThat(o).isEqualTo(new BatchOutcome.Fenced(-1, 0));
    assertThat(balance("t5", "acct-0")).isZero();
    cluster.awaitEqualDigests(Duration.ofSeconds(20));
  }
}
