package io.idem.core;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The snapshot format of a {@link KeyTable}: magic, version, bounds, the last token, the records in
 * the table's order, then a CRC32C of everything before. Writing a snapshot takes the table's
 * digest on the way ({@link KeyRecordHashes}); reading one checks every record and rebuilds the
 * table's indexes.
 */
final class KeyTableCodec {

  static final int MAGIC = 0x49444b59; // "IDKY"

  private KeyTableCodec() {}

  /**
   * The length of {@code s} encoded as {@link String#getBytes}({@code UTF_8}) encodes it, which
   * writes an unpaired surrogate as one byte ({@code '?'}).
   */
  static int utf8Length(String s) {
    int n = 0;
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x80) {
        n += 1;
      } else if (c < 0x800) {
        n += 2;
      } else if (Character.isHighSurrogate(c)
          && i + 1 < s.length()
          && Character.isLowSurrogate(s.charAt(i + 1))) {
        n += 4;
        i++;
      } else if (Character.isSurrogate(c)) {
        n += 1;
      } else {
        n += 3;
      }
    }
    return n;
  }

  /**
   * The length of {@link #write}'s output for {@code records}, counted from the records' fields
   * instead of encoded: a framed section states its length before its bytes.
   */
  static long snapshotBytes(KeyRecord[] records, boolean owned) {
    long n = 5 * Integer.BYTES + 2 * Long.BYTES + Integer.BYTES; // header, bounds, token, count
    for (KeyRecord r : records) {
      n += 3 * Integer.BYTES + utf8Length(r.id.scope()) + utf8Length(r.id.key());
      n += r.fingerprint.length + 4 * Long.BYTES + Integer.BYTES;
      n += r.response == null ? 0 : r.response.length;
      if (owned) {
        n += Integer.BYTES + (r.owner == null ? 0 : utf8Length(r.owner));
      }
    }
    return n + Integer.BYTES; // the CRC32C
  }

  /**
   * Writes the records {@code records[0..count)} in that order as a snapshot, and returns their
   * {@link KeyTable#digest}, taken from the same encoding of each record.
   */
  static String write(
      SnapshotEncoder e,
      KeyTable.Bounds bounds,
      long lastToken,
      KeyRecord[] records,
      int count,
      boolean owned)
      throws IOException {
    writeHeader(e, versionFor(owned), bounds, lastToken, count);
    KeyRecordHashes hashes = new KeyRecordHashes(owned);
    for (int i = 0; i < count; i++) {
      ByteBuffer encoded = hashes.add(records[i]);
      e.putRaw(encoded.array(), encoded.arrayOffset(), encoded.position());
    }
    e.finish();
    return hashes.digest(bounds, lastToken, count);
  }

  static int versionFor(boolean owned) {
    return owned ? KeyTable.SNAPSHOT_VERSION : KeyTable.UNOWNED_VERSION;
  }

  static void writeHeader(
      SnapshotEncoder e, int version, KeyTable.Bounds bounds, long lastToken, int count)
      throws IOException {
    e.putInt(MAGIC);
    e.putInt(version);
    e.putInt(bounds.maxKeyChars());
    e.putInt(bounds.maxFingerprintBytes());
    e.putInt(bounds.maxResponseBytes());
    e.putLong(bounds.maxRetentionMs());
    e.putLong(lastToken);
    e.putInt(count);
  }

  static String digestOf(
      KeyTable.Bounds bounds, long lastToken, KeyRecord[] records, int count, boolean owned) {
    KeyRecordHashes hashes = new KeyRecordHashes(owned);
    for (int i = 0; i < count; i++) {
      hashes.add(records[i]);
    }
    return hashes.digest(bounds, lastToken, count);
  }

  /**
   * Reads a table written by {@link KeyTable#writeSnapshot}, exactly its bytes.
   *
   * @throws SnapshotFormatException if the input is corrupt, truncated, of an unknown version, or
   *     fails its checksum; no table is returned then
   */
  static KeyTable readSnapshot(InputStream in) throws IOException {
    SnapshotDecoder d = new SnapshotDecoder(in);
    if (d.getInt() != MAGIC) {
      throw new SnapshotFormatException("not a key table snapshot");
    }
    int version = d.getInt();
    if (version != KeyTable.SNAPSHOT_VERSION
        && version != KeyTable.UNOWNED_VERSION
        && version != KeyTable.KEY_ORDER_VERSION) {
      throw new SnapshotFormatException("unknown key table snapshot version " + version);
    }
    KeyTable.Bounds bounds;
    try {
      bounds = new KeyTable.Bounds(d.getInt(), d.getInt(), d.getInt(), d.getLong());
    } catch (IllegalArgumentException e) {
      throw new SnapshotFormatException("bad bounds: " + e.getMessage());
    }
    long lastToken = d.getLong();
    KeyTable t = new KeyTable(bounds, lastToken);
    int n = d.getInt();
    if (n < 0) {
      throw new SnapshotFormatException("negative record count " + n);
    }
    int maxChars = t.bounds().maxKeyChars() * 4; // UTF-8 bytes
    KeyTable.KeyId previous = null;
    for (int i = 0; i < n; i++) {
      KeyTable.KeyId id =
          new KeyTable.KeyId(text(d, maxChars, "scope").intern(), text(d, maxChars, "key"));
      KeyRecord r = new KeyRecord(id, d.getBytes(t.bounds().maxFingerprintBytes(), "fingerprint"));
      r.token = d.getLong();
      r.deadline = d.getLong();
      r.retentionMs = d.getLong();
      r.completedAt = d.getLong();
      int maxResponse = t.bounds().maxResponseBytes();
      r.response = d.getBytes(maxResponse, "response");
      if (version >= KeyTable.SNAPSHOT_VERSION) {
        byte[] owner = d.getBytes(SessionTable.MAX_PRINCIPAL_BYTES, "owner");
        r.owner = owner == null ? null : new String(owner, StandardCharsets.UTF_8);
      }
      if (r.fingerprint == null
          || r.token < 1
          || r.token > lastToken
          || r.retentionMs < 1
          || (version == KeyTable.KEY_ORDER_VERSION
              && previous != null
              && previous.compareTo(id) >= 0)
          || !t.records().restore(r)) { // each key once (and version 1 in key order)
        throw new SnapshotFormatException("bad key record " + i);
      }
      previous = id;
    }
    // The expiry index tells records apart by token: no two may share one.
    long[] tokens = new long[t.size()];
    for (int i = 0; i < tokens.length; i++) {
      tokens[i] = t.records().at(i).token;
    }
    Arrays.sort(tokens);
    for (int i = 1; i < tokens.length; i++) {
      if (tokens[i] == tokens[i - 1]) {
        throw new SnapshotFormatException("two key records hold token " + tokens[i]);
      }
    }
    d.verifyChecksum();
    return t;
  }

  private static String text(SnapshotDecoder d, int max, String what) throws IOException {
    byte[] b = d.getBytes(max, what);
    if (b == null) {
      throw new SnapshotFormatException("missing " + what);
    }
    return new String(b, StandardCharsets.UTF_8);
  }
}
