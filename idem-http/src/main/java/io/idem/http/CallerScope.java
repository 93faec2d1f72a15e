package io.idem.http;

import io.idem.keys.IdempotencyKey;
import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The caller a request's key belongs to: where the filter found it and its name there. {@link
 * #encoded()} writes it into the key's scope injectively: two callers that differ in source or in
 * value never get the same scope, so no value a caller can send (a header, a principal's name)
 * reaches another caller's keys.
 *
 * <p>A scope is the source's tag ({@code principal:}, {@code header:} or {@code anonymous:}), then
 * either
 *
 * <ul>
 *   <li>{@code v:} and the value as it is, if the whole fits the store's 255 characters and the
 *       value is well-formed UTF-16 (no unpaired surrogate), or else
 *   <li>{@code h:} and the lower-case hex of the SHA-256 of the value's chars, two bytes each,
 *       big-endian (76 characters at most).
 * </ul>
 *
 * <p>Why two callers never share a scope:
 *
 * <ol>
 *   <li>The tags differ and each ends at its only colon, so none is a prefix of another: a scope
 *       starts with exactly one tag, its source's.
 *   <li>The two characters after the tag are {@code v:} or {@code h:}, never anything else: a scope
 *       names its form. The value only ever comes after the marker, so whatever it contains (a
 *       marker, a tag, a digest, colons) it cannot make a verbatim scope read as a hashed one or as
 *       another source's. This holds at every length: the 255-character bound only decides which
 *       form a value gets, and each value has exactly one.
 *   <li>In the verbatim form the value is the rest of the scope: distinct values, distinct scopes.
 *   <li>In the hashed form, distinct values have distinct bytes (two per char, taken as they are,
 *       whereas the JDK's encoders write every unpaired surrogate as a replacement), hence distinct
 *       digests unless SHA-256 collides: the assumption the request fingerprint rests on too.
 * </ol>
 *
 * <p>Every scope is well-formed UTF-16, so the stores, which keep scopes as UTF-8, keep distinct
 * scopes distinct as well.
 *
 * @param source where the caller was found
 * @param value the caller's name there (a principal's name, a header's value, the anonymous scope)
 */
record CallerScope(Source source, String value) {

  /** Where the filter found the caller, and the tag its scopes start with. */
  enum Source {
    /** {@code request.getUserPrincipal().getName()}. */
    PRINCIPAL("principal:"),
    /** The configured scope header's value, stripped. */
    HEADER("header:"),
    /** The configured anonymous scope. */
    ANONYMOUS("anonymous:");

    final String tag;

    Source(String tag) {
      this.tag = tag;
    }
  }

  /** Marks a value written as it is. */
  private static final String VERBATIM = "v:";

  /** Marks a value written as its digest. */
  private static final String HASHED = "h:";

  CallerScope {
    if (source == null || value == null) {
      throw new IllegalArgumentException("source and value must not be null");
    }
  }

  /** The key's scope: at most 255 characters, distinct for distinct callers. */
  String encoded() {
    String verbatim = source.tag + VERBATIM + value;
    if (verbatim.length() <= IdempotencyKey.MAX_CHARS && wellFormed(value)) {
      return verbatim;
    }
    return source.tag + HASHED + HexFormat.of().formatHex(sha256(value));
  }

  private static boolean wellFormed(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)
          && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        i++;
      } else if (Character.isSurrogate(c)) {
        return false;
      }
    }
    return true;
  }

  private static byte[] sha256(String value) {
    ByteBuffer chars = ByteBuffer.allocate(2 * value.length()); // big-endian
    chars.asCharBuffer().put(value);
    try {
      return MessageDigest.getInstance("SHA-256").digest(chars.array());
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK has SHA-256", e);
    }
  }
}
