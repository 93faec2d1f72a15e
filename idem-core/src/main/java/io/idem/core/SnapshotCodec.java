package io.idem.core;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * Session snapshot format, versions 1 to 3. All integers are big-endian.
 *
 * <pre>
 * int   magic = 0x49444D53 ("IDMS")
 * int   version = 1
 * int   window, int maxSessions, long maxTtlMs, int maxNameLength     (the bounds: replicated state)
 * int   sessionCount
 * sessionCount times, in ascending clientId:
 *   long clientId, long epoch, long grantNonce,
 *   versions 1 and 2: long secretHi, long secretLo; version 3: 32 bytes, the secret's SHA-256,
 *   long ttlMs, long lastActiveMs, long lowWater, long nextSeq,
 *   int nameLength (-1: anonymous), nameLength bytes of UTF-8,
 *   versions 2 and 3: int principalLength (-1: none), principalLength bytes of UTF-8,
 *   (nextSeq - lowWater) times: int responseLength, responseLength bytes   (for lowWater..nextSeq-1)
 * int   CRC32C of every byte above
 * </pre>
 *
 * <p>The reader checks every field's range and the checksum before it returns a table, so a corrupt
 * or truncated snapshot raises {@link SnapshotFormatException} and never yields a partly loaded
 * table. A new version gets a new number, a golden file, and a reader branch; version 1 files stay
 * readable.
 *
 * <p>Version 2 added each session's principal. Version 3 keeps each secret's hash in place of the
 * secret ({@link SessionSecret}): the writer always writes it, and the reader hashes the secrets of
 * versions 1 and 2 as it reads them.
 */
final class SnapshotCodec {
  static final int MAGIC = 0x49444D53;
  static final int VERSION = 3;

  private SnapshotCodec() {}

  /** {@link SessionTable#digest}: a SHA-256 of the table's snapshot, in hex. */
  static String digest(SessionTable table) {
    MessageDigest sha;
    try {
      sha = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JDK provides SHA-256", e);
    }
    try {
      write(table, sha::update);
    } catch (IOException e) {
      throw new IllegalStateException("a digest sink does not fail", e);
    }
    return HexFormat.of().formatHex(sha.digest());
  }

  static void write(SessionTable table, SnapshotEncoder.Sink sink) throws IOException {
    write(freeze(table), sink);
  }

  /**
   * The table's bounds and each session's fields as they are now, with the saved responses by
   * reference: the table replaces or drops a saved response but never changes its bytes, so the
   * copy writes what the table held at this moment whatever it does after. The sessions are put in
   * client id order when first written, not here (a freeze runs under the state lock).
   */
  static FrozenTable freeze(SessionTable table) {
    Session[] all = table.sessions().all();
    FrozenSession[] sessions = new FrozenSession[all.length];
    for (int i = 0; i < all.length; i++) {
      Session s = all[i];
      int saved = s.savedResponses();
      byte[][] responses = saved == 0 ? NO_RESPONSES : new byte[saved][];
      for (long seq = s.lowWater; seq < s.nextSeq; seq++) {
        responses[(int) (seq - s.lowWater)] = s.response(seq);
      }
      sessions[i] = new FrozenSession(s, responses);
    }
    return new FrozenTable(table.config(), sessions);
  }

  private static final byte[][] NO_RESPONSES = new byte[0][];

  /** A session's snapshot fields at a freeze. */
  private static final class FrozenSession {
    final long clientId;
    final long epoch;
    final long grantNonce;
    final byte[] secretHash;
    final long ttlMs;
    final long lastActiveMs;
    final long lowWater;
    final long nextSeq;
    final String name;
    final String principal;
    final byte[][] responses;

    FrozenSession(Session s, byte[][] responses) {
      this.clientId = s.clientId;
      this.epoch = s.epoch;
      this.grantNonce = s.grantNonce;
      this.secretHash = s.secretHash;
      this.ttlMs = s.ttlMs;
      this.lastActiveMs = s.lastActiveMs;
      this.lowWater = s.lowWater;
      this.nextSeq = s.nextSeq;
      this.name = s.name;
      this.principal = s.principal;
      this.responses = responses;
    }
  }

  /** A table at a freeze ({@link SessionTable#freeze}). */
  static final class FrozenTable implements SessionTable.Frozen {
    private final SessionTableConfig config;
    private final FrozenSession[] sessions;

    private boolean sorted;

    FrozenTable(SessionTableConfig config, FrozenSession[] sessions) {
      this.config = config;
      this.sessions = sessions;
    }

    @Override
    public void writeSnapshot(java.io.OutputStream out) throws IOException {
      write(this, out::write);
    }

    @Override
    public long snapshotBytes() {
      return length(this);
    }

    /** The sessions in ascending client id, sorted on the first call (the writer's thread). */
    synchronized FrozenSession[] ordered() {
      if (!sorted) {
        java.util.Arrays.sort(sessions, java.util.Comparator.comparingLong(s -> s.clientId));
        sorted = true;
      }
      return sessions;
    }
  }

  private static void write(FrozenTable table, SnapshotEncoder.Sink sink) throws IOException {
    SnapshotEncoder out = new SnapshotEncoder(sink);
    out.putInt(MAGIC);
    out.putInt(VERSION);
    SessionTableConfig c = table.config;
    out.putInt(c.window());
    out.putInt(c.maxSessions());
    out.putLong(c.maxTtlMs());
    out.putInt(c.maxNameLength());
    FrozenSession[] sessions = table.ordered();
    out.putInt(sessions.length);
    for (FrozenSession s : sessions) {
      out.putLong(s.clientId);
      out.putLong(s.epoch);
      out.putLong(s.grantNonce);
      out.putRaw(s.secretHash);
      out.putLong(s.ttlMs);
      out.putLong(s.lastActiveMs);
      out.putLong(s.lowWater);
      out.putLong(s.nextSeq);
      out.putBytes(s.name == null ? null : s.name.getBytes(StandardCharsets.UTF_8));
      out.putBytes(s.principal == null ? null : s.principal.getBytes(StandardCharsets.UTF_8));
      for (byte[] response : s.responses) {
        out.putBytes(response);
      }
    }
    out.finish();
  }

  /** The bytes {@link #write} writes for {@code table}: each field as it puts it, and the CRC. */
  private static long length(FrozenTable table) {
    long n = 2 * Integer.BYTES + 3 * Integer.BYTES + Long.BYTES + Integer.BYTES;
    for (FrozenSession s : table.sessions) {
      n += 7 * Long.BYTES + s.secretHash.length;
      n += bytesLength(s.name) + bytesLength(s.principal);
      for (byte[] response : s.responses) {
        n += Integer.BYTES + (response == null ? 0 : response.length);
      }
    }
    return n + Integer.BYTES;
  }

  /** What {@link SnapshotEncoder#putBytes} puts for {@code s} in UTF-8 (null: the length -1). */
  private static long bytesLength(String s) {
    return Integer.BYTES + (s == null ? 0L : Utf8.encodedLength(s));
  }

  static SessionTable read(InputStream stream) throws IOException {
    SnapshotDecoder in = new SnapshotDecoder(stream);
    int magic = in.getInt();
    if (magic != MAGIC) {
      throw new SnapshotFormatException(
          String.format("not a session snapshot: magic %08x, expected %08x", magic, MAGIC));
    }
    int version = in.getInt();
    if (version < 1 || version > VERSION) {
      throw new SnapshotFormatException(
          "unsupported session snapshot version "
              + version
              + "; this reader knows 1 to "
              + VERSION);
    }
    SessionTable table = new SessionTable(readConfig(in));
    int count = in.getInt();
    if (count < 0) {
      throw new SnapshotFormatException("negative session count " + count);
    }
    // Trust the count for pre-sizing only up to what the input can plausibly back; a corrupt
    // count must not make us allocate gigabytes before the checksum catches it.
    table.sessions().ensureCapacity(Math.min(count, 1 << 20));
    long previousId = Long.MIN_VALUE;
    for (int i = 0; i < count; i++) {
      Session s = readSession(in, i, version);
      if (i > 0 && s.clientId <= previousId) {
        throw new SnapshotFormatException(
            "session " + i + ": client ids not ascending (" + previousId + ", " + s.clientId + ")");
      }
      if (s.name != null && table.clientIdOf(s.name, s.principal) != -1) {
        throw new SnapshotFormatException("session " + i + ": duplicate name \"" + s.name + "\"");
      }
      previousId = s.clientId;
      table.sessions().add(s);
    }
    in.verifyChecksum();
    return table;
  }

  private static SessionTableConfig readConfig(SnapshotDecoder in) throws IOException {
    int window = in.getInt();
    int maxSessions = in.getInt();
    long maxTtlMs = in.getLong();
    int maxNameLength = in.getInt();
    try {
      return new SessionTableConfig(window, maxSessions, maxTtlMs, maxNameLength);
    } catch (IllegalArgumentException e) {
      throw new SnapshotFormatException("bad table bounds: " + e.getMessage(), e);
    }
  }

  /**
   * The fixed-size start of a session record: seven longs, the secret (two longs, or its hash), and
   * the name's length.
   */
  private static int headerBytes(int version) {
    return 7 * Long.BYTES
        + (version >= 3 ? SessionSecret.HASH_BYTES : 2 * Long.BYTES)
        + Integer.BYTES;
  }

  private static Session readSession(SnapshotDecoder in, int index, int version)
      throws IOException {
    in.prefetch(headerBytes(version));
    long clientId = in.getLong();
    long epoch = in.getLong();
    long grantNonce = in.getLong();
    byte[] secretHash =
        version >= 3
            ? in.getRaw(SessionSecret.HASH_BYTES)
            : SessionSecret.hash(in.getLong(), in.getLong());
    long ttlMs = in.getLong();
    long lastActiveMs = in.getLong();
    long lowWater = in.getLong();
    long nextSeq = in.getLong();
    String where = "session " + index + " (client " + clientId + ")";
    check(epoch >= 0, where, "negative epoch " + epoch);
    check(
        ttlMs >= 1 && ttlMs <= SessionTableConfig.MAX_TTL_LIMIT_MS,
        where,
        "TTL out of range " + ttlMs);
    check(
        lastActiveMs >= 0 && lastActiveMs <= SessionTable.MAX_TIME_MS,
        where,
        "last activity out of range " + lastActiveMs);
    check(
        lowWater >= 1 && nextSeq >= lowWater && nextSeq - lowWater <= SessionTableConfig.MAX_WINDOW,
        where,
        "bad sequence range [" + lowWater + ", " + nextSeq + ")");
    byte[] nameBytes = in.getBytes(SessionTableConfig.MAX_NAME_LENGTH_LIMIT * 4, where + " name");
    String name = nameBytes == null ? null : new String(nameBytes, StandardCharsets.UTF_8);
    check(name == null || !name.isEmpty(), where, "empty name");
    String principal = null;
    if (version >= 2) {
      byte[] p = in.getBytes(SessionTable.MAX_PRINCIPAL_BYTES, where + " principal");
      principal = p == null ? null : new String(p, StandardCharsets.UTF_8);
      check(principal == null || !principal.isEmpty(), where, "empty principal");
    }
    Session s =
        new Session(clientId, name, secretHash, principal, ttlMs, epoch, grantNonce, lastActiveMs);
    s.lowWater = lowWater;
    s.nextSeq = lowWater;
    for (long seq = lowWater; seq < nextSeq; seq++) {
      byte[] response = in.getBytes(SessionTable.MAX_RESPONSE_BYTES, where + " response " + seq);
      check(response != null, where, "missing response " + seq);
      s.append(response);
    }
    return s;
  }

  private static void check(boolean ok, String where, String what) throws SnapshotFormatException {
    if (!ok) {
      throw new SnapshotFormatException(where + ": " + what);
    }
  }
}
