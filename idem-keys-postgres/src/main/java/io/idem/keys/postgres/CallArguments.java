package io.idem.keys.postgres;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import java.time.Duration;

/**
 * The checks of a call's parts before anything is sent to PostgreSQL: a part out of the store's
 * bounds, or text PostgreSQL cannot store as given, is an {@link IllegalArgumentException} naming
 * the part and the value. Immutable; thread-safe.
 */
final class CallArguments {
  private final long maxRetentionMs;
  private final int maxResponseBytes;

  /**
   * @param maxRetentionMs the longest retention, in-progress timeout and extension
   * @param maxResponseBytes the largest stored response
   */
  CallArguments(long maxRetentionMs, int maxResponseBytes) {
    this.maxRetentionMs = maxRetentionMs;
    this.maxResponseBytes = maxResponseBytes;
  }

  static void checkKey(IdempotencyKey key) {
    if (key == null) {
      throw new IllegalArgumentException("key must not be null");
    }
    storable("scope", key.scope());
    storable("key", key.key());
  }

  /**
   * PostgreSQL text holds neither NUL nor half a surrogate pair; the driver would turn the latter
   * into '?', and two keys would share one record.
   */
  static void storable(String what, String s) {
    for (int i = 0; i < s.length(); i++) {
      char ch = s.charAt(i);
      if (ch == 0) {
        throw new IllegalArgumentException(
            what + " contains NUL (U+0000) at index " + i + ", which PostgreSQL text cannot hold");
      }
      if (Character.isHighSurrogate(ch)
          && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(ch)) {
        throw new IllegalArgumentException(
            what + " has an unpaired surrogate at index " + i + ": it is not valid Unicode");
      }
    }
  }

  static byte[] fingerprint(Fingerprint fingerprint) {
    if (fingerprint == null) {
      throw new IllegalArgumentException("fingerprint must not be null (Fingerprint.none())");
    }
    byte[] fp = fingerprint.bytes();
    if (fp.length > PostgresKeyStore.MAX_FINGERPRINT_BYTES) {
      throw new IllegalArgumentException(
          "fingerprint is "
              + fp.length
              + " bytes, at most "
              + PostgresKeyStore.MAX_FINGERPRINT_BYTES);
    }
    return fp;
  }

  long bounded(String what, Duration d) {
    if (d == null || d.toMillis() < 1 || d.toMillis() > maxRetentionMs) {
      throw new IllegalArgumentException(
          what + " must be in [1 ms, " + maxRetentionMs + " ms] (maxRetention), got " + d);
    }
    return d.toMillis();
  }

  void checkResponse(byte[] response) {
    if (response == null) {
      throw new IllegalArgumentException("response must not be null");
    }
    if (response.length > maxResponseBytes) {
      throw new IllegalArgumentException(
          "response is " + response.length + " bytes, over maxResponseBytes " + maxResponseBytes);
    }
  }
}
