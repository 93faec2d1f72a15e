package io.idem.server;

import com.google.protobuf.ByteOutput;
import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.idem.core.SessionTable;
import io.idem.core.SnapshotFormatException;
import io.idem.core.Utf8;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * One domain of the replicated state as its section of the snapshot ({@link StateSnapshot}). Each
 * domain owns its data: it alone writes and reads its section, and no other class writes its
 * fields.
 *
 * <p>The section's bytes are also the domain's contribution to the state digest, so they must be
 * canonical: equal states write equal bytes, whatever history led to them (ordered collections
 * only).
 */
interface StateSection {

  /** Writes this domain's state. Leaves {@code out} open; need not flush. */
  void writeSection(DataOutputStream out) throws IOException;

  /**
   * This domain's section as it is now, to be written later by another thread while the domain goes
   * on changing (a snapshot is written off the apply thread). Called under the state lock, so it
   * must be cheap: the default writes the section into memory now, which suits a small domain; a
   * domain that may hold much returns a copy of its fields instead, sharing what never changes.
   */
  default Frozen freeze() throws IOException {
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    DataOutputStream out = new DataOutputStream(bytes);
    writeSection(out);
    out.flush();
    byte[] written = bytes.toByteArray();
    return Frozen.of(target -> target.write(written), () -> written.length);
  }

  /** A section as it was when frozen: writes exactly what {@link #writeSection} wrote then. */
  @FunctionalInterface
  interface Frozen {
    void writeSection(DataOutputStream out) throws IOException;

    /**
     * How many bytes {@link #writeSection} writes, if known without writing them; else -1, and the
     * snapshot writer counts them by writing the section once to nowhere. A large section should
     * know: the count costs as much as the write.
     */
    default long length() {
      return -1;
    }

    /** A section written by {@code writer}, of the {@code length} it states. */
    static Frozen of(Frozen writer, java.util.function.LongSupplier length) {
      return new Frozen() {
        @Override
        public void writeSection(DataOutputStream out) throws IOException {
          writer.writeSection(out);
        }

        @Override
        public long length() {
          return length.getAsLong();
        }
      };
    }
  }

  /**
   * Reads a section written by {@link #writeSection} (or by an older version's writer) into this
   * domain, which must be empty. Reads exactly the section's bytes.
   *
   * @param formatVersion the snapshot's format version: older ones may lack fields
   * @throws SnapshotFormatException if a field is out of range
   * @throws EOFException if the input ends inside the section
   */
  void readSection(DataInputStream in, int formatVersion) throws IOException;

  // ---- encodings shared by the sections ----

  static void writeString(DataOutputStream out, String s) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    out.writeInt(b.length);
    out.write(b);
  }

  static String readString(DataInputStream in) throws IOException {
    return new String(readRaw(in), StandardCharsets.UTF_8);
  }

  /** The bytes {@link #writeString} writes for {@code s}. */
  static int stringLength(String s) {
    return 4 + Utf8.encodedLength(s);
  }

  static void writeBytes(DataOutputStream out, ByteString b) throws IOException {
    out.writeInt(b.size());
    // ByteString.writeTo(OutputStream) hands the stream a copy of its bytes, one allocation per
    // value per snapshot; the stream here only copies them into its buffer.
    UnsafeByteOperations.unsafeWriteTo(b, new StreamByteOutput(out));
  }

  /** The bytes {@link #writeBytes} writes for {@code b}. */
  static long bytesLength(ByteString b) {
    return 4L + b.size();
  }

  /** A stream as protobuf's {@link ByteOutput}: every write goes to the stream at once. */
  final class StreamByteOutput extends ByteOutput {
    private final OutputStream out;

    StreamByteOutput(OutputStream out) {
      this.out = out;
    }

    @Override
    public void write(byte value) throws IOException {
      out.write(value);
    }

    @Override
    public void write(byte[] value, int offset, int length) throws IOException {
      out.write(value, offset, length);
    }

    @Override
    public void writeLazy(byte[] value, int offset, int length) throws IOException {
      out.write(value, offset, length);
    }

    @Override
    public void write(ByteBuffer value) throws IOException {
      if (value.hasArray()) {
        out.write(value.array(), value.arrayOffset() + value.position(), value.remaining());
        value.position(value.limit());
      } else {
        byte[] copy = new byte[value.remaining()];
        value.get(copy);
        out.write(copy);
      }
    }

    @Override
    public void writeLazy(ByteBuffer value) throws IOException {
      write(value);
    }
  }

  static ByteString readBytes(DataInputStream in) throws IOException {
    return ByteString.copyFrom(readRaw(in));
  }

  /** A count read from a snapshot, refused if negative. */
  static int count(int n, String what) throws SnapshotFormatException {
    if (n < 0) {
      throw new SnapshotFormatException("negative " + what + " count " + n);
    }
    return n;
  }

  private static byte[] readRaw(DataInputStream in) throws IOException {
    int n = in.readInt();
    if (n < 0 || n > SessionTable.MAX_RESPONSE_BYTES) {
      throw new SnapshotFormatException("length " + n + " out of range");
    }
    byte[] b = in.readNBytes(n);
    if (b.length != n) {
      throw new EOFException();
    }
    return b;
  }
}
