package io.idem.http;

import io.idem.keys.IdempotencyKey;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The caller a request's key belongs to: where the filter found it and its name there. {@link
 * #encoded()} is the key's scope in the store.
 *
 * @param source where the caller was found
 * @param value the caller's name there (a principal's name, a header's value, the anonymous scope)
 */
record CallerScope(Source source, String value) {

  /** Where the filter found the caller. */
  enum Source {
    /** {@code request.getUserPrincipal().getName()}. */
    PRINCIPAL("principal:"),
    /** The configured scope header's value, stripped. */
    HEADER("header:"),
    /** The configured anonymous scope. */
    ANONYMOUS("");

    final String tag;

    Source(String tag) {
      this.tag = tag;
    }
  }

  CallerScope {
    if (source == null || value == null) {
      throw new IllegalArgumentException("source and value must not be null");
    }
  }

  /** Tag plus value, or the value's SHA-256 when that would exceed the scope's 255 chars. */
  String encoded() {
    if (source == Source.ANONYMOUS) {
      return value;
    }
    String s = source.tag + value;
    if (s.length() <= IdempotencyKey.MAX_CHARS) {
      return s;
    }
    return source.tag
        + "sha256:"
        + HexFormat.of().formatHex(sha256(value.getBytes(StandardCharsets.UTF_8)));
  }

  private static byte[] sha256(byte[] b) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(b);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }
}
