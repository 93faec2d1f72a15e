package io.idem.core;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * Reads what {@link SnapshotEncoder} wrote and verifies its checksum.
 *
 * <p>It reads exactly the snapshot's bytes and never past them, so a snapshot may be followed by
 * other data in the same stream; pass a buffered stream for speed.
 */
final class SnapshotDecoder {
  private static final int CHUNK = 64 * 1024;

  private final InputStream in;
  private final ByteBuffer buf = ByteBuffer.allocate(CHUNK);
  private final CRC32C crc = new CRC32C();
  private long offset;

  SnapshotDecoder(InputStream in) {
    this.in = in;
    buf.limit(0);
  }

  /** Bytes consumed so far, for error messages. */
  long offset() {
    return offset;
  }

  /**
   * Reads the next {@code n} bytes in one go, so that the getters for them that follow do no I/O of
   * their own. An optimisation only: every getter still fills what it needs.
   */
  void prefetch(int n) throws IOException {
    fill(n);
  }

  int getInt() throws IOException {
    fill(Integer.BYTES);
    return buf.getInt();
  }

  long getLong() throws IOException {
    fill(Long.BYTES);
    return buf.getLong();
  }

  /** Reads the next {@code n} bytes (a fixed-size field, small). */
  byte[] getRaw(int n) throws IOException {
    fill(n);
    byte[] bytes = new byte[n];
    buf.get(bytes);
    return bytes;
  }

  /**
   * Reads a length-prefixed byte array, or {@code null} for length -1.
   *
   * @throws SnapshotFormatException if the length is negative (other than -1) or above {@code max}
   */
  byte[] getBytes(int max, String what) throws IOException {
    int len = getInt();
    if (len == -1) {
      return null;
    }
    if (len < 0 || len > max) {
      throw new SnapshotFormatException(
          what + " length " + len + " out of range [0, " + max + "] at offset " + (offset - 4));
    }
    byte[] bytes = new byte[len];
    if (len <= CHUNK - buf.limit()) {
      fill(len);
      buf.get(bytes);
    } else {
      checksumConsumed();
      readFully(bytes, 0, len);
      crc.update(bytes, 0, len);
    }
    return bytes;
  }

  /**
   * Reads the trailing checksum and compares it with the checksum of everything read before.
   *
   * @throws SnapshotFormatException on a mismatch
   */
  void verifyChecksum() throws IOException {
    checksumConsumed();
    int expected = (int) crc.getValue();
    fill(Integer.BYTES);
    int stored = buf.getInt();
    if (stored != expected) {
      throw new SnapshotFormatException(
          String.format(
              "checksum mismatch: stored CRC32C %08x, computed %08x over %d bytes",
              stored, expected, offset - 4));
    }
  }

  /** Makes {@code n} more bytes readable from {@code buf}, reading exactly what is missing. */
  private void fill(int n) throws IOException {
    if (buf.remaining() >= n) {
      return;
    }
    if (buf.limit() + n > CHUNK) {
      checksumConsumed();
    }
    int missing = n - buf.remaining();
    int at = buf.limit();
    readFully(buf.array(), at, missing);
    buf.limit(at + missing);
  }

  /** Checksums the bytes consumed from {@code buf} and empties it; requires nothing unread. */
  private void checksumConsumed() {
    if (buf.hasRemaining()) {
      throw new IllegalStateException("checksum of a partially read buffer");
    }
    crc.update(buf.array(), 0, buf.limit());
    buf.clear();
    buf.limit(0);
  }

  private void readFully(byte[] dst, int off, int len) throws IOException {
    int n = in.readNBytes(dst, off, len);
    offset += n;
    if (n < len) {
      throw new SnapshotFormatException(
          "truncated snapshot: input ended at offset " + offset + ", " + (len - n) + " bytes early",
          new EOFException());
    }
  }
}
