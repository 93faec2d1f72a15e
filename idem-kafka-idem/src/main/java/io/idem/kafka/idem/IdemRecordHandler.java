package io.idem.kafka.idem;

import io.idem.client.Write;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jspecify.annotations.Nullable;

/**
 * The business step of a record on Idem: it decides the record's effect, a {@link Write} that the
 * store applies in the same log command as the partition's offset (and the record's key
 * completion). It runs before that command, so it must not have effects of its own in Idem; an
 * effect elsewhere (a call, another system's row) must carry {@code fencingToken}, which that
 * system checks against the highest it has seen.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
@FunctionalInterface
public interface IdemRecordHandler<K, V> {

  /**
   * The record's effect, or null for none (the offset still moves past it). An exception stops the
   * batch at this record, which is retried (and dead-lettered after the consumer's {@code
   * maxAttempts}).
   *
   * @param record the record
   * @param fencingToken the record's key's token if it has a key, else the partition claim's epoch;
   *     either grows with every new owner
   */
  @Nullable Write handle(ConsumerRecord<K, V> record, long fencingToken) throws Exception;
}
