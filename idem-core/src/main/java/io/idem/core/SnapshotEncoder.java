package io.idem.core;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * Big-endian writer for the session snapshot: buffers into 64 KiB chunks, checksums each chunk with
 * CRC32C as it leaves, and appends the checksum on {@link #finish()}.
 */
final class SnapshotEncoder {
  /** Where encoded bytes go: a stream, or a message digest. */
  @FunctionalInterface
  interface Sink {
    void write(byte[] bytes, int off, int len) throws IOException;
  }

  private static final int CHUNK = 64 * 1024;

  private final Sink sink;
  private final ByteBuffer buf = ByteBuffer.allocate(CHUNK);
  private final CRC32C crc = new CRC32C();

  SnapshotEncoder(Sink sink) {
    this.sink = sink;
  }

  void putInt(int v) throws IOException {
    room(Integer.BYTES);
    buf.putInt(v);
  }

  void putLong(long v) throws IOException {
    room(Long.BYTES);
    buf.putLong(v);
  }

  /** Writes {@code bytes} as a length prefix and the bytes; {@code null} is length -1. */
  void putBytes(byte[] bytes) throws IOException {
    if (bytes == null) {
      putInt(-1);
      return;
    }
    putInt(bytes.length);
    if (bytes.length <= buf.remaining()) {
      buf.put(bytes);
      return;
    }
    drain();
    crc.update(bytes, 0, bytes.length);
    sink.write(bytes, 0, bytes.length);
  }

  /** Writes {@code len} bytes of {@code bytes} from {@code off} as they are, with no length. */
  /** Writes {@code bytes} without a length (a fixed-size field). */
  void putRaw(byte[] bytes) throws IOException {
    putRaw(bytes, 0, bytes.length);
  }

  void putRaw(byte[] bytes, int off, int len) throws IOException {
    if (len > buf.remaining()) {
      drain();
      if (len > buf.capacity()) {
        crc.update(bytes, off, len);
        sink.write(bytes, off, len);
        return;
      }
    }
    buf.put(bytes, off, len);
  }

  /** Writes what is buffered, without a checksum: for an encoding that is only hashed. */
  void flushWithoutChecksum() throws IOException {
    drain();
  }

  /** Writes what is buffered and the checksum of everything written. */
  void finish() throws IOException {
    drain();
    buf.putInt((int) crc.getValue());
    sink.write(buf.array(), 0, buf.position());
    buf.clear();
  }

  private void room(int n) throws IOException {
    if (buf.remaining() < n) {
      drain();
    }
  }

  private void drain() throws IOException {
    if (buf.position() > 0) {
      crc.update(buf.array(), 0, buf.position());
      sink.write(buf.array(), 0, buf.position());
      buf.clear();
    }
  }
}
