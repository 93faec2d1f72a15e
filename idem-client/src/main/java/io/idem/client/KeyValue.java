package io.idem.client;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * A key's state as a linearizable read saw it.
 *
 * @param key the key
 * @param value its value, or {@code null} if the key holds a list
 * @param elements the list written by append, or an empty list for a plain value
 * @param version how many writes since the key was created
 * @param modRevision the log index of the last write
 * @param lease the lease the key is attached to, or {@code null}
 */
public record KeyValue(
    String key,
    byte @Nullable [] value,
    List<byte[]> elements,
    long version,
    long modRevision,
    @Nullable String lease) {

  /** The value as UTF-8 text, or {@code null} for a list. */
  public @Nullable String valueAsString() {
    return value == null ? null : new String(value, java.nio.charset.StandardCharsets.UTF_8);
  }
}
