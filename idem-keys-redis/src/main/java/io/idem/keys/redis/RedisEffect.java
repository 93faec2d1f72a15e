package io.idem.keys.redis;

import java.util.Arrays;

/**
 * One Redis write applied in the same Lua script as a key's completion ({@link
 * RedisKeyStore#complete(io.idem.keys.IdempotencyKey, long, byte[], RedisEffect)}): the business
 * step's write and its confirmation land together or not at all, so an owner that dies between them
 * cannot leave a write without its completion for the next owner, holding a valid newer token, to
 * repeat. Fencing stops a stale owner; this stops a redo.
 *
 * <p>A closed set of four commands, chosen because each is one command that either applies fully or
 * fails before writing anything: {@code RPUSH}, {@code SET}, {@code INCRBY}, {@code HSET}. The key
 * must lie in the store's namespace (start with its hash tag {@code {prefix}}, see {@link
 * RedisKeyStore#hashTag()}), so that the record and the effect share a hash slot, and must not be
 * one of the store's own keys (records {@code {prefix}:k:...} and the counter {@code
 * {prefix}:token}). Values are bounded like responses ({@link
 * RedisKeyStore.Builder#maxResponseBytes}). Immutable: the factories copy the bytes.
 */
public sealed interface RedisEffect {

  /** {@code RPUSH key value}: appends {@code value} to the list at {@code key}. */
  static RedisEffect push(String key, byte[] value) {
    return new Push(key, copy(value));
  }

  /** {@code SET key value}: writes {@code value} at {@code key} (no expiry; replaces any type). */
  static RedisEffect set(String key, byte[] value) {
    return new SetValue(key, copy(value));
  }

  /** {@code INCRBY key delta}: adds {@code delta} to the integer at {@code key} (absent: 0). */
  static RedisEffect incrementBy(String key, long delta) {
    return new IncrementBy(key, delta);
  }

  /** {@code HSET key field value}: writes {@code field} of the hash at {@code key}. */
  static RedisEffect hashSet(String key, String field, byte[] value) {
    if (field == null) {
      throw new IllegalArgumentException("field must not be null");
    }
    return new HashField(key, field, copy(value));
  }

  /** The Redis key written. */
  String key();

  /** See {@link #push}. */
  record Push(String key, byte[] value) implements RedisEffect {
    @Override
    public boolean equals(Object o) {
      return o instanceof Push p && p.key.equals(key) && Arrays.equals(p.value, value);
    }

    @Override
    public int hashCode() {
      return key.hashCode() * 31 + Arrays.hashCode(value);
    }

    @Override
    public String toString() {
      return "RPUSH " + key + " <" + value.length + " bytes>";
    }
  }

  /** See {@link #set}. */
  record SetValue(String key, byte[] value) implements RedisEffect {
    @Override
    public boolean equals(Object o) {
      return o instanceof SetValue s && s.key.equals(key) && Arrays.equals(s.value, value);
    }

    @Override
    public int hashCode() {
      return key.hashCode() * 31 + Arrays.hashCode(value);
    }

    @Override
    public String toString() {
      return "SET " + key + " <" + value.length + " bytes>";
    }
  }

  /** See {@link #incrementBy}. */
  record IncrementBy(String key, long delta) implements RedisEffect {}

  /** See {@link #hashSet}. */
  record HashField(String key, String field, byte[] value) implements RedisEffect {
    @Override
    public boolean equals(Object o) {
      return o instanceof HashField h
          && h.key.equals(key)
          && h.field.equals(field)
          && Arrays.equals(h.value, value);
    }

    @Override
    public int hashCode() {
      return (key.hashCode() * 31 + field.hashCode()) * 31 + Arrays.hashCode(value);
    }

    @Override
    public String toString() {
      return "HSET " + key + " " + field + " <" + value.length + " bytes>";
    }
  }

  private static byte[] copy(byte[] value) {
    if (value == null) {
      throw new IllegalArgumentException("value must not be null");
    }
    return value.clone();
  }
}
