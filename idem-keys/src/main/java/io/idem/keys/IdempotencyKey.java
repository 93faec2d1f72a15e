package io.idem.keys;

/**
 * An application idempotency key within its scope: a tenant or a principal, so that two callers who
 * pick the same key never share a record. Both at most {@link #MAX_CHARS} characters; the key must
 * not be empty (the scope may be, for a single-tenant service).
 *
 * @param scope the tenant or principal
 * @param key the key the caller chose (an {@code Idempotency-Key} header, a payment id, ...)
 */
public record IdempotencyKey(String scope, String key) {

  /** Longest scope and longest key, in characters. */
  public static final int MAX_CHARS = 255;

  /**
   * Validates both parts.
   *
   * @throws IllegalArgumentException naming the bad part
   */
  public IdempotencyKey {
    if (scope == null || scope.length() > MAX_CHARS) {
      throw new IllegalArgumentException(
          "scope must have at most " + MAX_CHARS + " characters, got " + describe(scope));
    }
    if (key == null || key.isEmpty() || key.length() > MAX_CHARS) {
      throw new IllegalArgumentException(
          "key must have 1 to " + MAX_CHARS + " characters, got " + describe(key));
    }
  }

  private static String describe(String s) {
    return s == null ? "null" : s.length() + " characters";
  }
}
