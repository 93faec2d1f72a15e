package io.idem.server;

import java.nio.charset.StandardCharsets;

/**
 * Size limits of keys, values, names and lease TTLs. They decide answers (a violation is a
 * deterministic {@code INVALID_ARGUMENT} answer, saved like any other), so they are part of the
 * replicated configuration ({@link ReplicatedConfig}): set when the cluster is bootstrapped,
 * changed through the log. A node's own {@link ServerConfig#limits()} only seeds the bootstrap.
 *
 * @param maxKeyBytes largest key, in UTF-8 bytes, in {@code [1, MAX_KEY_BYTES_LIMIT]}
 * @param maxValueBytes largest value, in {@code [1, MAX_VALUE_BYTES_LIMIT]}
 * @param maxNameChars largest lease name, in characters, in {@code [1, MAX_NAME_CHARS_LIMIT]}
 * @param maxLeaseTtlMs longest lease TTL, in {@code [1, MAX_LEASE_TTL_LIMIT_MS]}
 */
public record Limits(int maxKeyBytes, int maxValueBytes, int maxNameChars, long maxLeaseTtlMs) {

  /** Default {@link #maxKeyBytes()}: 4 KiB. */
  public static final int DEFAULT_MAX_KEY_BYTES = 4 * 1024;

  /** Default {@link #maxValueBytes()}: 1 MiB. */
  public static final int DEFAULT_MAX_VALUE_BYTES = 1024 * 1024;

  /** Default {@link #maxNameChars()}: 256. */
  public static final int DEFAULT_MAX_NAME_CHARS = 256;

  /** Default {@link #maxLeaseTtlMs()}: one day. */
  public static final long DEFAULT_MAX_LEASE_TTL_MS = 86_400_000L;

  /** Upper limit of {@link #maxKeyBytes()}: 64 KiB. */
  public static final int MAX_KEY_BYTES_LIMIT = 64 * 1024;

  /**
   * Upper limit of {@link #maxValueBytes()}: 2 MiB. The transport is sized for it (the front door's
   * largest inbound message, Raft's largest entry), so that the replicated limit can be raised up
   * to it without restarting nodes.
   */
  public static final int MAX_VALUE_BYTES_LIMIT = 2 * 1024 * 1024;

  /** Upper limit of {@link #maxNameChars()}. */
  public static final int MAX_NAME_CHARS_LIMIT = 4096;

  /** Upper limit of {@link #maxLeaseTtlMs()}: about 35 years, far from overflowing. */
  public static final long MAX_LEASE_TTL_LIMIT_MS = 1L << 40;

  /** The defaults: what every node enforces before a configuration is replicated. */
  public static final Limits DEFAULTS =
      new Limits(
          DEFAULT_MAX_KEY_BYTES,
          DEFAULT_MAX_VALUE_BYTES,
          DEFAULT_MAX_NAME_CHARS,
          DEFAULT_MAX_LEASE_TTL_MS);

  /**
   * Validates every bound.
   *
   * @throws IllegalArgumentException naming the first bound out of range
   */
  public Limits {
    String bad = problem(maxKeyBytes, maxValueBytes, maxNameChars, maxLeaseTtlMs);
    if (bad != null) {
      throw new IllegalArgumentException(bad);
    }
  }

  /** Why these bounds are not acceptable (naming the first bad one), or {@code null}. */
  static String problem(int maxKeyBytes, int maxValueBytes, int maxNameChars, long maxLeaseTtl) {
    String bad = outside("max_key_bytes", maxKeyBytes, MAX_KEY_BYTES_LIMIT);
    bad = bad != null ? bad : outside("max_value_bytes", maxValueBytes, MAX_VALUE_BYTES_LIMIT);
    bad = bad != null ? bad : outside("max_name_chars", maxNameChars, MAX_NAME_CHARS_LIMIT);
    return bad != null ? bad : outside("max_lease_ttl_ms", maxLeaseTtl, MAX_LEASE_TTL_LIMIT_MS);
  }

  static String outside(String name, long value, long max) {
    return value < 1 || value > max ? name + " must be in [1, " + max + "], got " + value : null;
  }

  /** Why {@code key} is not acceptable, or {@code null} if it is. */
  public String checkKey(String key) {
    if (key == null || key.isEmpty()) {
      return "key must not be empty";
    }
    int bytes = key.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > maxKeyBytes) {
      return "key is " + bytes + " bytes, the limit is " + maxKeyBytes;
    }
    return null;
  }

  /** Why a value of {@code size} bytes is not acceptable, or {@code null} if it is. */
  public String checkValue(int size) {
    return size > maxValueBytes
        ? "value is " + size + " bytes, the limit is " + maxValueBytes
        : null;
  }

  /** Why lease name {@code name} is not acceptable, or {@code null} if it is. */
  public String checkName(String name) {
    if (name == null || name.isEmpty()) {
      return "lease name must not be empty";
    }
    return name.length() > maxNameChars
        ? "lease name is " + name.length() + " characters, the limit is " + maxNameChars
        : null;
  }
}
