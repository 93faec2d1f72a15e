package io.idem.keys;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.jspecify.annotations.Nullable;

/**
 * The stored form of an outcome, as {@link IdempotentExecutor} writes and replays it: a leading
 * byte, 0 for a result (the codec's bytes follow) or 1 for a failure stored as final (its class
 * name, a newline, its message). For code that completes keys outside the executor (PostgreSQL's
 * transactional mode), so that such a key replays through the executor, and back.
 */
public final class StoredOutcomes {
  private static final byte SUCCESS = 0;
  private static final byte FAILURE = 1;

  private StoredOutcomes() {}

  /** A result's stored form. */
  public static byte[] success(byte[] value) {
    byte[] out = new byte[value.length + 1];
    out[0] = SUCCESS;
    System.arraycopy(value, 0, out, 1, value.length);
    return out;
  }

  /** A final failure's stored form: its class name and message. */
  public static byte[] failure(Exception e) {
    String text = e.getClass().getName() + "\n" + (e.getMessage() == null ? "" : e.getMessage());
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    byte[] out = new byte[b.length + 1];
    out[0] = FAILURE;
    System.arraycopy(b, 0, out, 1, b.length);
    return out;
  }

  /**
   * The result's bytes stored in {@code stored}.
   *
   * @throws StoredFailureException the stored outcome is a failure
   * @throws KeyStoreException the bytes are not in this form
   */
  public static byte[] replay(@Nullable IdempotencyKey key, byte[] stored) {
    if (stored.length == 0) {
      throw new KeyStoreException(key, "the stored response is empty: not written by this", null);
    }
    byte[] body = Arrays.copyOfRange(stored, 1, stored.length);
    if (stored[0] == SUCCESS) {
      return body;
    }
    if (stored[0] != FAILURE) {
      throw new KeyStoreException(
          key, "the stored response starts with " + stored[0] + ": not written by this", null);
    }
    String text = new String(body, StandardCharsets.UTF_8);
    int nl = text.indexOf('\n');
    throw new StoredFailureException(
        key, nl < 0 ? text : text.substring(0, nl), nl < 0 ? "" : text.substring(nl + 1));
  }

  /** As {@link #replay(IdempotencyKey, byte[])}, decoded by {@code codec}. */
  public static <T> T replay(
      @Nullable IdempotencyKey key, IdempotentExecutor.Codec<T> codec, byte[] stored) {
    return codec.decode(replay(key, stored));
  }
}
