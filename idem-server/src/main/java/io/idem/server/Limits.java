package io.idem.server;

import java.nio.charset.StandardCharsets;

/**
 * Size limits of keys, values, names and messages. The state machine enforces them (a violation is
 * a deterministic {@code INVALID_ARGUMENT} answer), and the front door and the client check them
 * early so that oversized input never reaches the log.
 *
 * @param maxKeyBytes largest key, in UTF-8 bytes
 * @param maxValueBytes largest value
 * @param maxNameChars largest lease or session name, in characters
 * @param maxLeaseTtlMs longest lease TTL
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

  /** The defaults. */
  public static final Limits DEFAULTS =
      new Limits(
          DEFAULT_MAX_KEY_BYTES,
          DEFAULT_MAX_VALUE_BYTES,
          DEFAULT_MAX_NAME_CHARS,
          DEFAULT_MAX_LEASE_TTL_MS);

  /** Validates every bound. */
  public Limits {
    if (maxKeyBytes < 1 || maxValueBytes < 0 || maxNameChars < 1 || maxLeaseTtlMs < 1) {
      throw new IllegalArgumentException(
          "limits must be positive: key "
              + maxKeyBytes
              + ", value "
              + maxValueBytes
              + ", name "
              + maxNameChars
              + ", lease TTL "
              + maxLeaseTtlMs);
    }
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
