package io.idem.http;

import io.idem.keys.IdempotentExecutor;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32C;

/**
 * A response as the key store keeps it: status, the chosen headers, body. {@code replayed} is true
 * when it was read back from the store (a retry, or a duplicate that waited), false for the run
 * that produced it.
 *
 * <p>Format, version 1 (big-endian): magic {@code "IH"}, version byte {@code 1}, status (u16),
 * header count (u16), then per header its name and value (each u16 length and UTF-8 bytes), body
 * length (u32) and body, and a CRC32C (u32) of everything before it. A reader refuses another magic
 * or version, a bad length or a bad checksum. {@code StoredResponseFormatTest} keeps the golden
 * bytes.
 *
 * @param status the HTTP status
 * @param headers name and value pairs, in order (a name may repeat)
 * @param body the body's bytes
 * @param replayed whether it came from the store
 */
record StoredResponse(int status, List<Header> headers, byte[] body, boolean replayed) {

  /** The format's version. */
  static final int VERSION = 1;

  private static final byte MAGIC_0 = 'I';
  private static final byte MAGIC_1 = 'H';

  /** One header field line. */
  record Header(String name, String value) {}

  StoredResponse {
    headers = List.copyOf(headers);
  }

  /** The encoded bytes, for the store. */
  byte[] encode() {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(32 + body.length);
    try (DataOutputStream out = new DataOutputStream(bytes)) {
      out.writeByte(MAGIC_0);
      out.writeByte(MAGIC_1);
      out.writeByte(VERSION);
      out.writeShort(status);
      out.writeShort(headers.size());
      for (Header h : headers) {
        writeText(out, h.name());
        writeText(out, h.value());
      }
      out.writeInt(body.length);
      out.write(body);
      CRC32C crc = new CRC32C();
      crc.update(bytes.toByteArray());
      out.writeInt((int) crc.getValue());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot happen: in memory", e);
    }
    return bytes.toByteArray();
  }

  private static void writeText(DataOutputStream out, String s) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    if (b.length > 0xFFFF) {
      throw new IllegalArgumentException("a header of " + b.length + " bytes cannot be stored");
    }
    out.writeShort(b.length);
    out.write(b);
  }

  /**
   * Reads {@code encoded} back, as a replay.
   *
   * @throws IllegalStateException naming what is wrong with the bytes
   */
  static StoredResponse decode(byte[] encoded) {
    if (encoded.length < 13) {
      throw new IllegalStateException("stored response too short: " + encoded.length + " bytes");
    }
    CRC32C crc = new CRC32C();
    crc.update(encoded, 0, encoded.length - 4);
    ByteBuffer in = ByteBuffer.wrap(encoded);
    if ((int) crc.getValue() != in.getInt(encoded.length - 4)) {
      throw new IllegalStateException("stored response fails its checksum");
    }
    if (in.get() != MAGIC_0 || in.get() != MAGIC_1) {
      throw new IllegalStateException("not a stored HTTP response (magic)");
    }
    int version = in.get();
    if (version != VERSION) {
      throw new IllegalStateException("stored response format version " + version + " unknown");
    }
    try {
      int status = Short.toUnsignedInt(in.getShort());
      int count = Short.toUnsignedInt(in.getShort());
      List<Header> headers = new ArrayList<>(count);
      for (int i = 0; i < count; i++) {
        headers.add(new Header(readText(in), readText(in)));
      }
      int length = in.getInt();
      if (length < 0 || length != in.remaining() - 4) {
        throw new IllegalStateException("stored response body length " + length + " is wrong");
      }
      byte[] body = new byte[length];
      in.get(body);
      return new StoredResponse(status, headers, body, true);
    } catch (java.nio.BufferUnderflowException e) {
      throw new IllegalStateException("stored response truncated", e);
    }
  }

  private static String readText(ByteBuffer in) {
    int n = Short.toUnsignedInt(in.getShort());
    byte[] b = new byte[n];
    in.get(b);
    return new String(b, StandardCharsets.UTF_8);
  }

  /** The executor's codec: encode for the store, decode as a replay. */
  static final IdempotentExecutor.Codec<StoredResponse> CODEC =
      new IdempotentExecutor.Codec<>() {
        @Override
        public byte[] encode(StoredResponse value) {
          return value.encode();
        }

        @Override
        public StoredResponse decode(byte[] bytes) {
          return StoredResponse.decode(bytes);
        }
      };

  @Override
  public boolean equals(Object o) {
    return o instanceof StoredResponse r
        && status == r.status
        && replayed == r.replayed
        && headers.equals(r.headers)
        && Arrays.equals(body, r.body);
  }

  @Override
  public int hashCode() {
    return 31 * (31 * status + headers.hashCode()) + Arrays.hashCode(body);
  }

  @Override
  public String toString() {
    return "StoredResponse[" + status + ", " + headers + ", " + body.length + " bytes]";
  }

  /**
   * Sends this stored response as a replay: its status, headers and body, with {@link
   * IdempotencyFilter#REPLAYED_HEADER}.
   */
  void replayTo(HttpServletResponse response) throws IOException {
    response.setStatus(status);
    for (Header h : headers) {
      if (h.name().equalsIgnoreCase("Content-Type")) {
        response.setContentType(h.value());
      } else {
        response.addHeader(h.name(), h.value());
      }
    }
    response.setHeader(IdempotencyFilter.REPLAYED_HEADER, "true");
    response.setContentLength(body.length);
    response.getOutputStream().write(body);
  }
}
