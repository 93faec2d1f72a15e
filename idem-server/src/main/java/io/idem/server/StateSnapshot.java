package io.idem.server;

import io.idem.core.KeyTable;
import io.idem.core.SnapshotFormatException;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.DigestOutputStream;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.zip.CRC32C;
import java.util.zip.CheckedInputStream;
import java.util.zip.CheckedOutputStream;

/**
 * The state machine's snapshot, format version 9: a sequence of sections, one per domain of the
 * {@link ReplicatedState}, each written and read by the domain that owns it. Big-endian:
 *
 * <pre>
 * int magic = 0x49444D4B ("IDMK"), int version = 9
 * per section, in ascending id: int id, long length, then length bytes written by its domain
 *   1 the log position (ReplicatedState)   2 the replicated configuration (ConfigState)
 *   3 leases (LeaseState)                  4 keys and values (KvState)
 *   5 sessions (SessionState: idem-core's own snapshot, with its own CRC32C)
 *   6 application idempotency keys (KeyState: idem-core's key table snapshot, with its own CRC32C)
 *   7 the log format in force (FormatState)  8 access control (AuthState)
 *   9 default quotas, backend budget and alarm (QuotaState)
 *   10 the group of a cluster of several Raft groups (GroupState)
 * int CRC32C of every byte above
 * </pre>
 *
 * <p>Every section is required, in this order ({@link ReplicatedState#sections}), and must fill
 * exactly its length. A later version adds a section (a new domain) with a new id and a new version
 * number; the other sections' bytes stay as they are, and older snapshots are read with the new
 * section empty: version 5 added section 6 (keys), and versions 1 to 4 are read with an empty key
 * table. Version 4 is version 5 without section 6. Version 6 is version 5 with the key table's
 * snapshot version 2 in section 6, which lists the records in the table's own order instead of
 * sorted by key (the sort was most of the snapshot writer's work); the reader takes either in
 * either. Version 7 adds section 7 (the log format in force; older snapshots are read with the
 * format they imply) and section 8 (access control; older snapshots are read with auth off and no
 * roles). Version 8 adds section 9 (quotas; older snapshots are read with the code's defaults and
 * no alarm). Version 9 adds section 10, and only a group of a cluster of several Raft groups is
 * written in it: a cluster of one group writes version 8 ({@link #versionFor}), and older snapshots
 * are read as of a cluster of one group. Owners of keys, key records and leases (log format 7) are
 * marked inside their sections so that records without one keep their bytes ({@link KvState},
 * {@link LeaseState}, idem-core's key table version 3).
 *
 * <p>Versions 1 to 3 had no framing: the same sections' bytes, in the same order, one after the
 * other, and the CRC32C. They are still read, each section by its domain from the version's bytes.
 * Version 3 has every section. Version 2 had no configuration (nodes decided by their own flags):
 * it is read as not configured, with the default limits and the session bounds its session table
 * carries, and the next leader bootstraps a configuration. Version 1 also had no lease holders.
 * Golden files pin versions 2 to 6 ({@code StateSnapshotFormatTest}).
 *
 * <p>The reader checks the magic, version, framing, ranges and the checksum before it returns a
 * state.
 */
final class StateSnapshot {
  static final int MAGIC = 0x49444D4B;
  static final int VERSION = 9;

  /** The oldest version the reader still reads. */
  static final int OLDEST_VERSION = 1;

  /** The first version whose sections carry an id and a length. */
  static final int FRAMED_SINCE_VERSION = 4;

  /**
   * The version the digest names: it hashes version 3's layout (header, then the sections' bytes
   * without framing), so that the same state has the same digest as before version 4. The key table
   * (section 6, version 5) is hashed only when it is not pristine (see {@link #digest}), so that a
   * state without keys has the same digest as before version 5; so are the log format in force and
   * access control (sections 7 and 8) and the quotas (section 9), so that a state either holds as
   * an older snapshot implies has the digest it had before version 7.
   */
  private static final int DIGEST_VERSION = 3;

  /**
   * One section of the snapshot.
   *
   * @param id its id in a framed snapshot; ascending in the order of sections
   * @param sinceVersion the first snapshot version that carries it; older ones leave it empty
   * @param part the domain that writes and reads it
   */
  record Section(int id, int sinceVersion, StateSection part) {}

  private StateSnapshot() {}

  static void write(ReplicatedState s, OutputStream target) throws IOException {
    freeze(s).write(target);
  }

  /**
   * The state's sections as they are now ({@link StateSection#freeze}), to be written later while
   * the state goes on changing. Called under the state lock: its cost is the apply thread's pause.
   */
  static Frozen freeze(ReplicatedState s) throws IOException {
    List<FrozenSection> sections = new ArrayList<>(s.sections.size());
    KeyTable.Frozen keys = null;
    int version = versionFor(s);
    for (Section section : s.sections) {
      if (section.sinceVersion() > version) {
        continue;
      }
      if (section.part() == s.keys) {
        keys = s.keys.table().freeze();
        sections.add(new FrozenSection(section.id(), keys::writeSnapshot, keys, false));
      } else {
        boolean hashed =
            section.part() == s.auth
                ? !s.auth.pristine()
                : section.part() == s.configuration.quotas
                    ? !s.configuration.quotas.pristine()
                    : section.part() == s.configuration.groups
                        || section.part() != s.configuration.format
                        || !s.configuration.format.pristine();
        sections.add(new FrozenSection(section.id(), section.part().freeze(), null, hashed));
      }
    }
    return new Frozen(List.copyOf(sections), keys, s.keys.pristine(), version);
  }

  /**
   * The version a state is written in: {@link #VERSION} for a group of a cluster of several, whose
   * section 10 says which group it is; version 8, byte for byte as before groups existed, for a
   * cluster of one group (section 10 would say nothing), so that its snapshots and digests stay as
   * they were.
   */
  static int versionFor(ReplicatedState s) {
    return s.configuration.groups.multi() ? VERSION : SINGLE_GROUP_VERSION;
  }

  /** The version a cluster of one group writes (see {@link #versionFor}). */
  static final int SINGLE_GROUP_VERSION = 8;

  /**
   * A frozen section; {@code keys} is the key table's (section 6), else null; {@code hashed}: its
   * bytes go into the digest as they are (the key table's go in as its own digest).
   */
  private record FrozenSection(
      int id, StateSection.Frozen part, KeyTable.Frozen keys, boolean hashed) {
    /**
     * Its length: the key table's counted from its records, the others' as they state it ({@link
     * StateSection.Frozen#length}); a section that does not know is written once to nowhere (they
     * are small), so that no copy of a section is held in memory.
     */
    long length() throws IOException {
      if (keys != null) {
        return keys.snapshotBytes();
      }
      long stated = part.length();
      return stated >= 0 ? stated : sizeOf(part);
    }
  }

  /**
   * A state frozen by {@link #freeze}: writes the snapshot of the state as it was then, and gives
   * its digest.
   */
  static final class Frozen {
    private final List<FrozenSection> sections;
    private final KeyTable.Frozen keys;
    private final boolean keysPristine;
    private final int version;
    private volatile String written; // the digest, taken by write(); null before

    private Frozen(
        List<FrozenSection> sections, KeyTable.Frozen keys, boolean keysPristine, int version) {
      this.sections = sections;
      this.keys = keys;
      this.keysPristine = keysPristine;
      this.version = version;
    }

    /**
     * The state's {@link StateSnapshot#digest} as it was when frozen. After {@link #write}, the one
     * it took while writing: nothing is encoded again.
     */
    String digest() {
      String done = written;
      if (done != null) {
        return done;
      }
      try {
        MessageDigest sha = sha256();
        DataOutputStream out =
            new DataOutputStream(
                new BufferedOutputStream(
                    new DigestOutputStream(OutputStream.nullOutputStream(), sha), 1 << 16));
        out.writeInt(MAGIC);
        out.writeInt(DIGEST_VERSION);
        for (FrozenSection section : sections) {
          if (section.hashed()) {
            section.part().writeSection(out);
          }
        }
        if (!keysPristine) {
          out.write(keys.digest().getBytes(StandardCharsets.UTF_8));
        }
        out.flush();
        return HexFormat.of().formatHex(sha.digest());
      } catch (IOException e) {
        throw new IllegalStateException("digest of an in-memory state failed", e);
      }
    }

    /**
     * Writes the snapshot; leaves {@code target} open.
     *
     * @throws IllegalStateException if a section writes other than the length it stated: a bug,
     *     caught here rather than by the reader of a corrupt snapshot
     */
    void write(OutputStream target) throws IOException {
      CRC32C crc = new CRC32C();
      MessageDigest sha = sha256();
      sha.update(
          ByteBuffer.allocate(2 * Integer.BYTES).putInt(MAGIC).putInt(DIGEST_VERSION).flip());
      // The digest hashes the sections' bytes as they pass (the hashed ones, without framing):
      // each section is encoded once, for the file and the digest alike.
      Counter counted = new Counter(new CheckedOutputStream(target, crc), sha);
      DataOutputStream out = new DataOutputStream(new BufferedOutputStream(counted, 1 << 16));
      out.writeInt(MAGIC);
      out.writeInt(version);
      for (FrozenSection section : sections) {
        long length = section.length();
        out.writeInt(section.id());
        out.writeLong(length);
        out.flush();
        long start = counted.count;
        counted.hashing = section.hashed();
        section.part().writeSection(out);
        out.flush();
        counted.hashing = false;
        if (counted.count - start != length) {
          throw new IllegalStateException(
              "section "
                  + section.id()
                  + " wrote "
                  + (counted.count - start)
                  + " bytes, not the "
                  + length
                  + " it stated");
        }
      }
      new DataOutputStream(target).writeInt((int) crc.getValue());
      target.flush();
      if (!keysPristine) {
        sha.update(keys.digest().getBytes(StandardCharsets.UTF_8));
      }
      written = HexFormat.of().formatHex(sha.digest());
    }
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("this JVM has no SHA-256", e);
    }
  }

  /**
   * The SHA-256 of the state's canonical encoding, in hex: equal states give equal digests. It
   * hashes the magic, {@link #DIGEST_VERSION}, and every section's bytes in order, without framing,
   * except the key table's, and the log format's and access control's while they hold what a
   * snapshot before version 7 implies; then, unless the key table is as a new one (no record and no
   * token ever given), the key table's own digest ({@link io.idem.core.KeyTable#digest}) as UTF-8
   * hex.
   */
  static String digest(ReplicatedState s) {
    try {
      return freeze(s).digest();
    } catch (IOException e) {
      throw new IllegalStateException("freezing an in-memory state failed", e);
    }
  }

  /**
   * Reads a snapshot written by {@link #write}, or by an older version's writer.
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
      for (Section section : s.sections) {
        if (section.sinceVersion() > version) {
          continue;
        }
        if (version >= FRAMED_SINCE_VERSION) {
          readFramed(in, section, version);
        } else {
          section.part().readSection(in, version);
        }
      }
      int expected = (int) crc.getValue();
      int stored = new DataInputStream(buffered).readInt();
      if (stored != expected) {
        throw new SnapshotFormatException(
            String.format(
                "state snapshot checksum mismatch: stored %08x, computed %08x", stored, expected));
      }
      s.checkRestored();
      return s;
    } catch (EOFException e) {
      throw new SnapshotFormatException("truncated state snapshot", e);
    }
  }

  private static void readFramed(DataInputStream in, Section section, int version)
      throws IOException {
    int id = in.readInt();
    if (id != section.id()) {
      throw new SnapshotFormatException("expected section " + section.id() + ", found " + id);
    }
    long length = in.readLong();
    if (length < 0) {
      throw new SnapshotFormatException("section " + id + ": negative length " + length);
    }
    Bounded body = new Bounded(in, length);
    try {
      section.part().readSection(new DataInputStream(body), version);
    } catch (EOFException e) {
      if (body.remaining > 0) {
        throw e; // the input ended, not the section
      }
      throw new SnapshotFormatException("section " + id + " is longer than its length " + length);
    }
    if (body.remaining > 0) {
      throw new SnapshotFormatException(
          "section " + id + ": " + body.remaining + " of its " + length + " bytes unread");
    }
  }

  private static long sizeOf(StateSection.Frozen part) throws IOException {
    Counter counter = new Counter(OutputStream.nullOutputStream(), null);
    DataOutputStream out = new DataOutputStream(new BufferedOutputStream(counter, 1 << 16));
    part.writeSection(out);
    out.flush();
    return counter.count;
  }

  /**
   * Counts the bytes written through it, and hashes them into {@code sha} while {@code hashing}.
   */
  private static final class Counter extends FilterOutputStream {
    private final MessageDigest sha;
    long count;
    boolean hashing;

    Counter(OutputStream out, MessageDigest sha) {
      super(out);
      this.sha = sha;
    }

    @Override
    public void write(int b) throws IOException {
      out.write(b);
      count++;
      if (hashing) {
        sha.update((byte) b);
      }
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
      out.write(b, off, len);
      count += len;
      if (hashing) {
        sha.update(b, off, len);
      }
    }
  }

  /** At most {@code remaining} bytes of another stream: one section's. */
  private static final class Bounded extends InputStream {
    private final InputStream in;
    long remaining;

    Bounded(InputStream in, long length) {
      this.in = in;
      this.remaining = length;
    }

    @Override
    public int read() throws IOException {
      if (remaining == 0) {
        return -1;
      }
      int b = in.read();
      if (b >= 0) {
        remaining--;
      }
      return b;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      if (len == 0) {
        return 0;
      }
      if (remaining == 0) {
        return -1;
      }
      int n = in.read(b, off, (int) Math.min(len, remaining));
      if (n > 0) {
        remaining -= n;
      }
      return n;
    }
  }
}
