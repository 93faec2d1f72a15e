package io.idem.keys.redis;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

/**
 * How {@link RedisKeyStore}'s calls meet the transition script ({@code transitions.lua}): the
 * namespace's Redis keys, the scripts' arguments (checked here: a bad one is an {@link
 * IllegalArgumentException} before anything is sent), and the scripts' replies, read back as {@link
 * Acquisition}s, {@link Settlement}s and records. A reply of an unexpected shape is an {@link
 * IllegalStateException}. Immutable; thread-safe.
 */
final class ScriptCodec {
  private final String hashTag;
  private final byte[] recordPrefix;
  private final byte[] counterKey;
  private final int maxResponseBytes;

  /** The codec of namespace {@code prefix}, whose responses and values hold at most the bound. */
  ScriptCodec(String prefix, int maxResponseBytes) {
    this.hashTag = "{" + prefix + "}";
    this.recordPrefix = ("{" + prefix + "}:k:").getBytes(StandardCharsets.UTF_8);
    this.counterKey = ("{" + prefix + "}:token").getBytes(StandardCharsets.UTF_8);
    this.maxResponseBytes = maxResponseBytes;
  }

  /** The namespace's hash tag, {@code {prefix}}. */
  String hashTag() {
    return hashTag;
  }

  /** The namespace's token counter key (not a copy: callers must not change it). */
  byte[] counterKey() {
    return counterKey;
  }

  /**
   * The record's Redis key: {@code {prefix}:k:<scope length in bytes>:<scope>:<key>}. The length
   * makes it unambiguous ("a:b"/"c" and "a"/"b:c" are two records); the hash tag keeps a namespace
   * in one slot.
   */
  byte[] recordKey(IdempotencyKey key) {
    require(key != null, "key must not be null");
    byte[] scope = key.scope().getBytes(StandardCharsets.UTF_8);
    byte[] name = key.key().getBytes(StandardCharsets.UTF_8);
    byte[] len = (scope.length + ":").getBytes(StandardCharsets.US_ASCII);
    byte[] out = new byte[recordPrefix.length + len.length + scope.length + 1 + name.length];
    int at = 0;
    for (byte[] part : new byte[][] {recordPrefix, len, scope, {':'}, name}) {
      System.arraycopy(part, 0, out, at, part.length);
      at += part.length;
    }
    return out;
  }

  void checkResponse(byte[] response) {
    require(
        response != null && response.length <= maxResponseBytes,
        "response must be at most "
            + maxResponseBytes
            + " bytes, got "
            + (response == null ? "null" : response.length + " bytes"));
  }

  /**
   * The effect's Redis key, if it lies in the namespace (the record's hash slot) and is none of the
   * store's own keys.
   */
  byte[] effectKey(RedisEffect effect) {
    String k = effect.key();
    require(
        k != null && k.startsWith(hashTag),
        "an effect's key must start with the namespace's hash tag " + hashTag + ", got " + k);
    byte[] b = k.getBytes(StandardCharsets.UTF_8);
    require(
        !Arrays.equals(b, counterKey) && !startsWith(b, recordPrefix),
        "an effect must not write the store's own keys ("
            + hashTag
            + ":k:..., "
            + hashTag
            + ":token), got "
            + k);
    return b;
  }

  byte[][] effectArgs(long token, byte[] response, RedisEffect effect) {
    byte[] t = ascii(token);
    if (effect instanceof RedisEffect.Push p) {
      return new byte[][] {t, response, utf8("RPUSH"), value(p.value())};
    }
    if (effect instanceof RedisEffect.SetValue p) {
      return new byte[][] {t, response, utf8("SET"), value(p.value())};
    }
    if (effect instanceof RedisEffect.IncrementBy p) {
      return new byte[][] {t, response, utf8("INCRBY"), ascii(p.delta())};
    }
    RedisEffect.HashField p = (RedisEffect.HashField) effect; // the last of a sealed set
    return new byte[][] {t, response, utf8("HSET"), utf8(p.field()), value(p.value())};
  }

  private byte[] value(byte[] v) {
    require(
        v.length <= maxResponseBytes,
        "an effect's value must be at most " + maxResponseBytes + " bytes, got " + v.length);
    return v;
  }

  private static boolean startsWith(byte[] b, byte[] prefix) {
    return b.length >= prefix.length
        && Arrays.equals(b, 0, prefix.length, prefix, 0, prefix.length);
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  // ---- replies ----

  static Acquisition acquisition(List<Object> reply) {
    switch (tag(reply)) {
      case "A":
        return new Acquisition.Acquired(number(reply, 1), number(reply, 2));
      case "C":
        return new Acquisition.Completed(bytes(reply, 1));
      case "P":
        return new Acquisition.InProgress(number(reply, 1));
      case "M":
        return new Acquisition.Mismatch();
      default:
        throw unexpected(reply);
    }
  }

  static Settlement settlement(List<Object> reply) {
    switch (tag(reply)) {
      case "D":
        return new Settlement.Done(number(reply, 1));
      case "F":
        return new Settlement.Fenced(number(reply, 1));
      case "C":
        return new Settlement.Completed(bytes(reply, 1));
      default:
        throw unexpected(reply);
    }
  }

  static Optional<RedisKeyRecord> record(List<Object> reply) {
    switch (tag(reply)) {
      case "0":
        return Optional.empty();
      case "S":
        return Optional.of(
            new RedisKeyRecord(
                new String(bytes(reply, 1), StandardCharsets.US_ASCII).equals("C"),
                number(reply, 2),
                number(reply, 3),
                number(reply, 4),
                number(reply, 5),
                bytes(reply, 6),
                bytes(reply, 7)));
      default:
        throw unexpected(reply);
    }
  }

  static String tag(List<Object> reply) {
    if (reply == null || reply.isEmpty()) {
      throw unexpected(reply);
    }
    return new String(bytes(reply, 0), StandardCharsets.US_ASCII);
  }

  static byte[] bytes(List<Object> reply, int i) {
    if (reply.size() <= i || !(reply.get(i) instanceof byte[] b)) {
      throw unexpected(reply);
    }
    return b;
  }

  private static long number(List<Object> reply, int i) {
    try {
      return Long.parseLong(new String(bytes(reply, i), StandardCharsets.US_ASCII));
    } catch (NumberFormatException e) {
      throw unexpected(reply);
    }
  }

  private static IllegalStateException unexpected(List<Object> reply) {
    return new IllegalStateException(
        "unexpected script reply " + (reply == null ? "null" : reply.size() + " elements"));
  }

  static byte[] ascii(long n) {
    return Long.toString(n).getBytes(StandardCharsets.US_ASCII);
  }

  static long millis(String what, Duration d) {
    if (d == null || d.toMillis() < 1 || d.compareTo(RedisKeyStore.MAX_DURATION) > 0) {
      throw new IllegalArgumentException(
          what + " must be in [1 ms, " + RedisKeyStore.MAX_DURATION.toDays() + " days], got " + d);
    }
    return d.toMillis();
  }

  static void require(boolean ok, String message) {
    if (!ok) {
      throw new IllegalArgumentException(message);
    }
  }
}
