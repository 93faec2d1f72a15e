package io.idem.examples.payments;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.zip.CRC32C;

/**
 * The withdrawal resource, {@code /accounts/{account}/withdrawals/{id}}, whose id is the
 * withdrawal's Idempotency-Key. A withdrawal is what the key store holds for its key: the stored
 * answer of its {@code POST}. So reading one needs no record of the service's own, only the
 * filter's documented formats (docs/HTTP.md): the caller's scope and the stored response, version
 * 1.
 */
final class Withdrawals {
  private Withdrawals() {}

  /** The scope header the service names callers with. */
  static final String CLIENT_HEADER = "X-Client-Id";

  /** The scope of requests without it. */
  static final String ANONYMOUS_SCOPE = "payments-example";

  /** The most characters of a key (and of a scope). */
  private static final int MAX_CHARS = 255;

  /**
   * The withdrawal's path: the id percent-encoded (RFC 3986) byte by byte of its UTF-8, everything
   * but letters, digits, {@code -}, {@code _} and {@code ~}. A dot is encoded too, so that no id
   * ({@code .}, {@code ..}) makes a dot segment that a client would remove; {@code /}, {@code %},
   * {@code ?}, {@code #}, space and quote become escapes, so the path is one segment and a valid
   * {@code Location}.
   */
  static String path(String account, String id) {
    StringBuilder b = new StringBuilder("/accounts/").append(account).append("/withdrawals/");
    for (byte x : id.getBytes(StandardCharsets.UTF_8)) {
      int c = x & 0xff;
      if ((c >= 'A' && c <= 'Z')
          || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9')
          || c == '-'
          || c == '_'
          || c == '~') {
        b.append((char) c);
      } else {
        b.append('%').append(Character.toUpperCase(Character.forDigit(c >> 4, 16)));
        b.append(Character.toUpperCase(Character.forDigit(c & 0xf, 16)));
      }
    }
    return b.toString();
  }

  /**
   * The id that a raw (still encoded) path segment names; empty if it is not percent-encoded UTF-8
   * of 1 to 255 printable ASCII characters, what an Idempotency-Key may hold.
   */
  static Optional<String> id(String rawSegment) {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(rawSegment.length());
    for (int i = 0; i < rawSegment.length(); i++) {
      char c = rawSegment.charAt(i);
      if (c == '%') {
        if (i + 2 >= rawSegment.length()) {
          return Optional.empty();
        }
        int hi = Character.digit(rawSegment.charAt(i + 1), 16);
        int lo = Character.digit(rawSegment.charAt(i + 2), 16);
        if (hi < 0 || lo < 0) {
          return Optional.empty();
        }
        bytes.write(hi << 4 | lo);
        i += 2;
      } else if (c > 0x20 && c < 0x7f && c != '/') {
        bytes.write(c);
      } else {
        return Optional.empty();
      }
    }
    String id = bytes.toString(StandardCharsets.US_ASCII);
    if (id.isEmpty()
        || id.length() > MAX_CHARS
        || !id.chars().allMatch(c -> c >= 0x20 && c < 0x7f)) {
      return Optional.empty();
    }
    return Optional.of(id);
  }

  /**
   * The filter's bytes in what a key store holds for a completed key: after a leading byte, 0 for a
   * result (1 is a stored failure, which the filter never stores; docs/HTTP.md, Stored format);
   * empty for anything else.
   */
  static Optional<byte[]> executorResult(byte[] stored) {
    return stored.length > 1 && stored[0] == 0
        ? Optional.of(java.util.Arrays.copyOfRange(stored, 1, stored.length))
        : Optional.empty();
  }

  /**
   * A stored answer, as the filter stored it.
   *
   * @param status its status
   * @param location its {@code Location} header, or null
   * @param body its body
   */
  record Stored(int status, String location, byte[] body) {}

  /**
   * Reads the filter's stored response, format version 1 (docs/HTTP.md): magic {@code IH}, version
   * 1, status (u16), header count (u16), each header's name and value (u16 length, UTF-8), body
   * length (u32), body, CRC32C (u32) of everything before it; big-endian. Empty for anything else.
   */
  static Optional<Stored> decode(byte[] bytes) {
    try {
      ByteBuffer in = ByteBuffer.wrap(bytes);
      if (bytes.length < 4 + 7 || in.get() != 'I' || in.get() != 'H' || in.get() != 1) {
        return Optional.empty();
      }
      CRC32C crc = new CRC32C();
      crc.update(bytes, 0, bytes.length - 4);
      if ((int) crc.getValue() != ByteBuffer.wrap(bytes, bytes.length - 4, 4).getInt()) {
        return Optional.empty();
      }
      int status = in.getShort() & 0xffff;
      int headers = in.getShort() & 0xffff;
      String location = null;
      for (int i = 0; i < headers; i++) {
        String name = text(in);
        String value = text(in);
        if (location == null && name.equalsIgnoreCase("Location")) {
          location = value;
        }
      }
      byte[] body = new byte[in.getInt()];
      in.get(body);
      return in.remaining() == 4
          ? Optional.of(new Stored(status, location, body))
          : Optional.empty();
    } catch (RuntimeException e) { // a length past the end, a negative length
      return Optional.empty();
    }
  }

  private static String text(ByteBuffer in) {
    byte[] b = new byte[in.getShort() & 0xffff];
    in.get(b);
    return new String(b, StandardCharsets.UTF_8);
  }
}
