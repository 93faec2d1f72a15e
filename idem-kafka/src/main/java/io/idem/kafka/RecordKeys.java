package io.idem.kafka;

import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.function.Function;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.jspecify.annotations.Nullable;

/**
 * Which idempotency key a record has, beyond its position. By default ({@link #offsets()}) none: a
 * record is identified by its (topic, partition, offset), which the partition's committed offset
 * already covers, so no key record is kept. A key taken from the record ({@link #header}, {@link
 * #of}) also makes a message that a non-idempotent producer wrote twice, at two offsets, count
 * once.
 *
 * @param <K> the records' key type
 * @param <V> the records' value type
 */
@FunctionalInterface
public interface RecordKeys<K, V> {

  /** The record's key, or null for a record identified by its offset only. */
  @Nullable String keyOf(ConsumerRecord<K, V> record);

  /** Records are identified by their offsets only (the default). */
  static <K, V> RecordKeys<K, V> offsets() {
    return r -> null;
  }

  /**
   * The key is the UTF-8 value of the record's last header named {@code name}; a record without it
   * is identified by its offset only.
   */
  static <K, V> RecordKeys<K, V> header(String name) {
    Objects.requireNonNull(name, "name");
    return r -> {
      Header h = r.headers().lastHeader(name);
      return h == null || h.value() == null || h.value().length == 0
          ? null
          : new String(h.value(), StandardCharsets.UTF_8);
    };
  }

  /** The key is what {@code key} takes from the record (a field of its value, say); null: none. */
  static <K, V> RecordKeys<K, V> of(Function<ConsumerRecord<K, V>, @Nullable String> key) {
    Objects.requireNonNull(key, "key");
    return key::apply;
  }
}
