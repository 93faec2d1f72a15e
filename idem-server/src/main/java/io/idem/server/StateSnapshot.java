package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.core.SessionTable;
import io.idem.core.SnapshotFormatException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32C;
import java.util.zip.CheckedInputStream;
import java.util.zip.CheckedOutputStream;

/**
 * The state machine's snapshot, format version 3. Big-endian:
 *
 * <pre>
 * int magic = 0x49444D4B ("IDMK"), int version = 3
 * long appliedIndex, long appliedTerm, long clock, long lastTerm, long duplicatesSuppressed
 * long configRevision (0: no configuration applied); if above 0, the replicated limits:
 *   int maxKeyBytes, int maxValueBytes, int maxNameChars, long maxLeaseTtlMs
 * int leaseCount; per lease, by name: utf name, long holder (session id; absent in version 1),
 *   long ttlMs, long expiresAtMs
 * int keyCount; per key, in key order:
 *   utf key, byte kind (0 value, 1 list), long version, long createRevision, long modRevision,
 *   utf lease ("" for none), value: int length + bytes, or list: int count, then length + bytes each
 * the session table's own snapshot (io.idem.core, with its own CRC32C; it carries the session
 *   bounds of the replicated configuration)
 * int CRC32C of every byte above
 * </pre>
 *
 * <p>Older versions are still read. Version 2 had no configuration (nodes decided by their own
 * flags): it is read as not configured, with the default limits and the session bounds its session
 * table carries, and the next leader bootstraps a configuration. Version 1 also had no lease
 * holders. Golden files pin every version ({@code StateSnapshotFormatTest}).
 *
 * <p>The reader checks the magic, version, ranges and the checksum before it returns a state.
 */
final class StateSnapshot {
  static final int MAGIC = 0x49444D4B;
  static final int VERSION = 3;

  /** The oldest version the reader still reads. */
  static final int OLDEST_VERSION = 1;

  private StateSnapshot() {}

  static void write(ReplicatedState s, OutputStream target) throws IOException {
    CRC32C crc = new CRC32C();
    CheckedOutputStream checked = new CheckedOutputStream(target, crc);
    DataOutputStream out = new DataOutputStream(new BufferedOutputStream(checked, 1 << 16));
    writeBody(s, out);
    out.flush();
    new DataOutputStream(target).writeInt((int) crc.getValue());
    target.flush();
  }

  /** The SHA-256 of the canonical encoding, in hex: equal states give equal digests. */
  static String digest(ReplicatedState s) {
    try {
      MessageDigest sha = MessageDigest.getInstance("SHA-256");
      DataOutputStream out =
          new DataOutputStream(
              new BufferedOutputStream(
                  new DigestOutputStream(OutputStream.nullOutputStream(), sha), 1 << 16));
      writeBody(s, out);
      out.flush();
      return HexFormat.of().formatHex(sha.digest());
    } catch (NoSuchAlgorithmException | IOException e) {
      throw new IllegalStateException("digest of an in-memory state failed", e);
    }
  }

  private static void writeBody(ReplicatedState s, DataOutputStream out) throws IOException {
    out.writeInt(MAGIC);
    out.writeInt(VERSION);
    out.writeLong(s.appliedIndex);
    out.writeLong(s.appliedTerm);
    out.writeLong(s.clock);
    out.writeLong(s.lastTerm);
    out.writeLong(s.duplicatesSuppressed);
    out.writeLong(s.configRevision);
    if (s.configured()) {
      out.writeInt(s.limits.maxKeyBytes());
      out.writeInt(s.limits.maxValueBytes());
      out.writeInt(s.limits.maxNameChars());
      out.writeLong(s.limits.maxLeaseTtlMs());
    }
    out.writeInt(s.leases.size());
    for (LeaseTable.Lease l : s.leases.all()) {
      writeString(out, l.name);
      out.writeLong(l.holder);
      out.writeLong(l.ttlMs);
      out.writeLong(l.expiresAtMs);
    }
    out.writeInt(s.kv.size());
    for (Map.Entry<String, KvStore.Entry> kv : s.kv.all()) {
      KvStore.Entry e = kv.getValue();
      writeString(out, kv.getKey());
      out.writeByte(e.isList() ? 1 : 0);
      out.writeLong(e.version);
      out.writeLong(e.createRevision);
      out.writeLong(e.modRevision);
      writeString(out, e.lease == null ? "" : e.lease);
      if (e.isList()) {
        out.writeInt(e.elements.size());
        for (ByteString b : e.elements) {
          writeBytes(out, b);
        }
      } else {
        writeBytes(out, e.value);
      }
    }
    out.flush();
    s.sessions.writeSnapshot(out);
  }

  /**
   * Reads a snapshot written by {@link #write}.
   *
   * @throws SnapshotFormatException if it is corrupt, truncated or of an unknown version
   */
  static ReplicatedState read(InputStream source) throws IOException {
    CRC32C crc = new CRC32C();
    // Buffer below the checksum, so that the checksum sees exactly the bytes the reader consumed.
    InputStream buffered = new BufferedInputStream(source, 1 << 16);
    DataInputStream in = new DataInputStream(new CheckedInputStream(buffered, crc));
    try {
      if (in.readInt() != MAGIC) {
        throw new SnapshotFormatException("not an Idem state snapshot (bad magic)");
      }
      int version = in.readInt();
      if (version < OLDEST_VERSION || version > VERSION) {
        throw new SnapshotFormatException(
            "unsupported state snapshot version "
                + version
                + "; this node reads "
                + OLDEST_VERSION
                + " to "
                + VERSION);
      }
      ReplicatedState s = new ReplicatedState();
      s.appliedIndex = in.readLong();
      s.appliedTerm = in.readLong();
      s.clock = in.readLong();
      s.lastTerm = in.readLong();
      s.duplicatesSuppressed = in.readLong();
      if (version >= 3) {
        readConfig(in, s);
      }
      int leases = count(in.readInt(), "lease");
      for (int i = 0; i < leases; i++) {
        String name = readString(in);
        long holder = version == 1 ? 0 : in.readLong();
        s.leases.restore(name, holder, in.readLong(), in.readLong());
      }
      int keys = count(in.readInt(), "key");
      for (int i = 0; i < keys; i++) {
        String key = readString(in);
        KvStore.Entry e = new KvStore.Entry();
        int kind = in.readByte();
        e.version = in.readLong();
        e.createRevision = in.readLong();
        e.modRevision = in.readLong();
        String lease = readString(in);
        if (kind == 1) {
          int n = count(in.readInt(), "list element");
          List<ByteString> elements = new ArrayList<>(Math.min(n, 1024));
          for (int j = 0; j < n; j++) {
            elements.add(readBytes(in));
          }
          e.elements = elements;
        } else if (kind == 0) {
          e.value = readBytes(in);
        } else {
          throw new SnapshotFormatException("key \"" + key + "\": unknown kind " + kind);
        }
        if (!lease.isEmpty()) {
          LeaseTable.Lease l = s.leases.get(lease);
          if (l == null) {
            throw new SnapshotFormatException("key \"" + key + "\": unknown lease " + lease);
          }
          e.lease = lease;
          l.keys.add(key);
        }
        s.kv.restore(key, e);
      }
      s.sessions = SessionTable.readSnapshot(in);
      int expected = (int) crc.getValue();
      int stored = new DataInputStream(buffered).readInt();
      if (stored != expected) {
        throw new SnapshotFormatException(
            String.format(
                "state snapshot checksum mismatch: stored %08x, computed %08x", stored, expected));
      }
      return s;
    } catch (EOFException e) {
      throw new SnapshotFormatException("truncated state snapshot", e);
    }
  }

  private static void readConfig(DataInputStream in, ReplicatedState s) throws IOException {
    s.configRevision = in.readLong();
    if (s.configRevision < 0 || s.configRevision > s.appliedIndex) {
      throw new SnapshotFormatException(
          "configuration revision " + s.configRevision + " out of [0, " + s.appliedIndex + "]");
    }
    if (s.configured()) {
      int key = in.readInt();
      int value = in.readInt();
      int name = in.readInt();
      long leaseTtl = in.readLong();
      String bad = Limits.problem(key, value, name, leaseTtl);
      if (bad != null) {
        throw new SnapshotFormatException("replicated limits: " + bad);
      }
      s.limits = new Limits(key, value, name, leaseTtl);
    }
  }

  private static int count(int n, String what) throws SnapshotFormatException {
    if (n < 0) {
      throw new SnapshotFormatException("negative " + what + " count " + n);
    }
    return n;
  }

  private static void writeString(DataOutputStream out, String s) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    out.writeInt(b.length);
    out.write(b);
  }

  private static String readString(DataInputStream in) throws IOException {
    return new String(readRaw(in), StandardCharsets.UTF_8);
  }

  private static void writeBytes(DataOutputStream out, ByteString b) throws IOException {
    out.writeInt(b.size());
    b.writeTo(out);
  }

  private static ByteString readBytes(DataInputStream in) throws IOException {
    return ByteString.copyFrom(readRaw(in));
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
