package io.idem.kafka.spi;

import java.util.List;
import java.util.concurrent.CompletionStage;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Where a receiver keeps each partition's consumed offset, and applies each record's effect in the
 * same atomic step: one command on Idem, one transaction on PostgreSQL. The store, not the client,
 * fences a consumer that lost its partition. Its contract:
 *
 * <ul>
 *   <li>A claim raises the partition's epoch in the store; a commit under any other epoch applies
 *       nothing and answers {@link BatchOutcome.Fenced}.
 *   <li>Records apply in offset order. Each record's effect, its key's completion (if it has a key)
 *       and the offset after it commit together or not at all: no effect without its offset, no
 *       offset without its effect.
 *   <li>A record below the committed position is not applied again: a resend after an unknown
 *       outcome is safe.
 *   <li>A store error is never a yes: the stage completes exceptionally, and the consumer resumes
 *       from the last position it knows.
 * </ul>
 *
 * <p>The handler that computes a record's effect belongs to the store (it writes in the store's own
 * terms), so stores are built with it. Implementations are thread-safe; the consumer calls them
 * from its polling thread and waits for the stages.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
public interface ReceiverStore<K, V> {

  /** Claims {@code partition} for {@code group}, fencing its earlier claimants. */
  CompletionStage<PartitionClaim> claim(String group, TopicPartition partition);

  /**
   * Runs the handler on {@code records} (all of {@code partition}, offsets ascending) and commits
   * them under the claim {@code epoch}, as the contract says.
   */
  CompletionStage<BatchOutcome> process(
      String group, TopicPartition partition, long epoch, List<ConsumerRecord<K, V>> records);

  /**
   * Commits {@code record}'s offset with no effect, under the claim {@code epoch}: the consumer
   * gave up on it (it was dead-lettered). A key it has is released, not completed.
   */
  CompletionStage<BatchOutcome> skip(
      String group, TopicPartition partition, long epoch, ConsumerRecord<K, V> record);
}
