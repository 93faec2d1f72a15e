package io.idem.keys;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The executor's form of a stored outcome: one byte (success or failure), then the codec's bytes or
 * the failure's type and message.
 */
final class StoredOutcomes {
  private static final byte SUCCESS = 0;
  private static final byte FAILURE = 1;

  private StoredOutcomes() {}

  static byte[] success(byte[] value) {
    byte[] out = new byte[value.length + 1];
    out[0] = SUCCESS;
    System.arraycopy(value, 0, out, 1, value.length);
    return out;
  }

  static byte[] failure(Exception e) {
    String text = e.getClass().getName() + "\n" + (e.getMessage() == null ? "" : e.getMessage());
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    byte[] out = new byte[b.length + 1];
    out[0] = FAILURE;
    System.arraycopy(b, 0, out, 1, b.length);
    return out;
  }

  /**
   * The value stored in {@code response}.
   *
   * @throws StoredFailureException the stored outcome is a failure
   * @throws KeyStoreException the bytes are not in this form
   */
  static <T> T replay(IdempotencyKey key, IdempotentExecutor.Codec<T> codec, byte[] response) {
    if (response.length == 0) {
      throw new KeyStoreException(key, "the stored response is empty: not written by this", null);
    }
    byte[] body = Arrays.copyOfRange(response, 1, response.length);
    if (response[0] == SUCCESS) {
      return codec.decode(body);
    }
    String text = new String(body, StandardCharsets.UTF_8);
    int nl = text.indexOf('\n');
    throw new StoredFailureException(
        key, nl < 0 ? text : text.substring(0, nl), nl < 0 ? "" : text.substring(nl + 1));
  }
}
