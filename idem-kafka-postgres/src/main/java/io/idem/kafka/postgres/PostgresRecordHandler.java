package io.idem.kafka.postgres;

import java.sql.Connection;
import org.apache.kafka.clients.consumer.ConsumerRecord;

/**
 * A record's effect on PostgreSQL, run by {@link PostgresReceiverStore} once per record: its writes
 * go through {@code connection}, inside the batch's transaction, which also records the record's
 * key and the partition's offset after it, so all of them commit or none does. It must not commit,
 * roll back, or change the connection's auto-commit mode. An exception is the record's failed
 * attempt: the transaction is rolled back, and the records before it run again in a new one that
 * commits without it. So the handler may run more than once for a record; its writes in this
 * transaction land once.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
@FunctionalInterface
public interface PostgresRecordHandler<K, V> {

  /**
   * Applies {@code record}.
   *
   * @param record the record
   * @param connection the batch's connection, inside its transaction
   * @param fencingToken the token of this ownership: the record key's token when the record has a
   *     key ({@link io.idem.kafka.RecordKeys}), else the partition claim's epoch; both grow with
   *     every change of hands, so an effect outside PostgreSQL can refuse a stale one
   */
  void handle(ConsumerRecord<K, V> record, Connection connection, long fencingToken)
      throws Exception;
}
