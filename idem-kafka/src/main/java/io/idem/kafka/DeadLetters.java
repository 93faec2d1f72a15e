package io.idem.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Where a record goes after it failed {@code maxAttempts} times: the consumer publishes it here,
 * waits for the acknowledgement, then commits its offset with no effect. A crash between the two
 * publishes it again: dead letters are at least once.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
@FunctionalInterface
public interface DeadLetters<K, V> {

  /** Publishes {@code record}, which failed {@code attempts} times, the last with {@code cause}. */
  void publish(ConsumerRecord<K, V> record, Throwable cause, int attempts) throws Exception;

  /** Header: the record's original topic. */
  String TOPIC_HEADER = "idem.dlt.topic";

  /** Header: the record's original partition, as decimal text. */
  String PARTITION_HEADER = "idem.dlt.partition";

  /** Header: the record's original offset, as decimal text. */
  String OFFSET_HEADER = "idem.dlt.offset";

  /** Header: the class and message of the last failure. */
  String CAUSE_HEADER = "idem.dlt.cause";

  /** Header: how many times the record failed, as decimal text. */
  String ATTEMPTS_HEADER = "idem.dlt.attempts";

  /**
   * Publishes to {@code topic} with {@code producer} (whose serializers match the records' types),
   * keeping the record's key, value and headers and adding the {@code idem.dlt.*} headers; waits up
   * to {@code timeout} for the acknowledgement.
   */
  static <K, V> DeadLetters<K, V> toTopic(Producer<K, V> producer, String topic, Duration timeout) {
    Objects.requireNonNull(producer, "producer");
    Objects.requireNonNull(topic, "topic");
    return (r, cause, attempts) -> {
      RecordHeaders h = new RecordHeaders(r.headers().toArray());
      h.add(TOPIC_HEADER, r.topic().getBytes(StandardCharsets.UTF_8));
      h.add(PARTITION_HEADER, Integer.toString(r.partition()).getBytes(StandardCharsets.UTF_8));
      h.add(OFFSET_HEADER, Long.toString(r.offset()).getBytes(StandardCharsets.UTF_8));
      h.add(CAUSE_HEADER, String.valueOf(cause).getBytes(StandardCharsets.UTF_8));
      h.add(ATTEMPTS_HEADER, Integer.toString(attempts).getBytes(StandardCharsets.UTF_8));
      producer
          .send(new ProducerRecord<>(topic, null, r.key(), r.value(), h))
          .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
    };
  }
}
