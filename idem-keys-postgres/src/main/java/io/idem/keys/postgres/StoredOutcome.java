package io.idem.keys.postgres;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.StoredFailureException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The stored form of an outcome, the same as {@link io.idem.keys.IdempotentExecutor}'s: a leading
 * byte, 0 for a result (its bytes follow) or 1 for a failure stored as final (its class name, a
 * newline, its message). So a key completed in a transaction replays through the executor, and
 * back; {@code PostgresKeyStoreTest} holds the two to the same format.
 */
final class StoredOutcome {
  private static final byte SUCCESS = 0;
  private static final byte FAILURE = 1;

  private StoredOutcome() {}

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
   * The result stored in {@code stored}.
   *
   * @throws StoredFailureException a failure was stored as the key's outcome
   * @throws KeyStoreException the bytes were not written in this form
   */
  static byte[] replay(IdempotencyKey key, byte[] stored) {
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
}
