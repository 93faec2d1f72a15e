-- Idem's Kafka receiver on PostgreSQL, schema version 1: each (consumer group, topic, partition)'s
-- claim epoch and committed position. PostgresReceiverStore.migrate() applies this file once, in
-- one transaction, and records it in idem_kafka_schema. A team that runs its own migration tool may
-- apply this file with it instead.
--
-- epoch: raised by every claim of the partition; a batch commits only under the current epoch, so
-- a consumer that lost the partition is refused by this row, not by a check in the client.
-- position: the next offset to consume, -1 before the first commit. A batch locks the row (FOR
-- UPDATE) for its whole transaction, so a claim waits for the batch in flight to end.
CREATE TABLE idem_kafka_offsets (
  consumer_group text    COLLATE "C" NOT NULL,
  topic          text    COLLATE "C" NOT NULL,
  partition      integer NOT NULL CHECK (partition >= 0),
  epoch          bigint  NOT NULL CHECK (epoch > 0),
  position       bigint  NOT NULL CHECK (position >= -1),
  PRIMARY KEY (consumer_group, topic, partition)
);
