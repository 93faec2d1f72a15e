package io.idem.core;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * The digest of a table whatever the order of its records: each record is encoded as the snapshot
 * encodes it and hashed (SHA-256) on its own, the hashes are added up modulo 2^256, and the digest
 * is the SHA-256 of the snapshot's header (magic, version, bounds, last token, count) followed by
 * that sum. Keys are unique, so equal tables give equal sums in any order. Hashing each record
 * costs less than the sort that a digest of one stream in key order needs: 1.4-1.8 s of the
 * writer's 2 s at 820,000 records with random keys (docs/PERFORMANCE.md, tenth sitting).
 */
final class KeyRecordHashes {
  private final MessageDigest sha = sha256();
  private final byte[] hash = new byte[32];
  private final ByteBuffer hashView = ByteBuffer.wrap(hash);
  private final long[] sum = new long[4]; // big-endian: sum[0] holds the most significant bits
  private ByteBuffer encoded = ByteBuffer.allocate(512);
  private String scope; // the last record's scope (interned: most records share a few) ...
  private byte[] scopeBytes; // ... and its encoding
  private final boolean owned; // version 3: each record ends with its owner

  KeyRecordHashes(boolean owned) {
    this.owned = owned;
  }

  /** Encodes {@code r}, adds its hash, and returns the encoding (until the next call). */
  @SuppressWarnings("ReferenceEquality") // interned scopes: identity is the cache check
  ByteBuffer add(KeyRecord r) {
    if (r.id.scope() != scope) {
      scope = r.id.scope();
      scopeBytes = scope.getBytes(StandardCharsets.UTF_8);
    }
    byte[] key = r.id.key().getBytes(StandardCharsets.UTF_8);
    int response = r.response == null ? 0 : r.response.length;
    byte[] owner = owned && r.owner != null ? r.owner.getBytes(StandardCharsets.UTF_8) : null;
    int size =
        4 * Integer.BYTES
            + scopeBytes.length
            + key.length
            + r.fingerprint.length
            + 4 * Long.BYTES
            + response
            + (owned ? Integer.BYTES + (owner == null ? 0 : owner.length) : 0);
    if (encoded.capacity() < size) {
      encoded = ByteBuffer.allocate(Math.max(size, 2 * encoded.capacity()));
    }
    encoded.clear();
    encoded.putInt(scopeBytes.length).put(scopeBytes);
    encoded.putInt(key.length).put(key);
    encoded.putInt(r.fingerprint.length).put(r.fingerprint);
    encoded.putLong(r.token).putLong(r.deadline).putLong(r.retentionMs).putLong(r.completedAt);
    if (r.response == null) {
      encoded.putInt(-1);
    } else {
      encoded.putInt(r.response.length).put(r.response);
    }
    if (owned) {
      if (owner == null) {
        encoded.putInt(-1);
      } else {
        encoded.putInt(owner.length).put(owner);
      }
    }
    sha.update(encoded.array(), 0, encoded.position());
    try {
      sha.digest(hash, 0, hash.length);
    } catch (DigestException e) {
      throw new IllegalStateException("a SHA-256 is 32 bytes", e);
    }
    long carry = 0;
    for (int i = 3; i >= 0; i--) {
      long x = hashView.getLong(8 * i);
      long s = sum[i] + x;
      long c = Long.compareUnsigned(s, x) < 0 ? 1 : 0;
      long t = s + carry;
      if (Long.compareUnsigned(t, s) < 0) {
        c = 1;
      }
      sum[i] = t;
      carry = c;
    }
    return encoded;
  }

  /** The digest of a table with these bounds, last token, and the {@code count} records added. */
  String digest(KeyTable.Bounds bounds, long lastToken, int count) {
    MessageDigest total = sha256();
    SnapshotEncoder header = new SnapshotEncoder(total::update);
    try {
      KeyTableCodec.writeHeader(header, KeyTableCodec.versionFor(owned), bounds, lastToken, count);
      for (long lane : sum) {
        header.putLong(lane);
      }
      header.flushWithoutChecksum();
    } catch (IOException e) {
      throw new IllegalStateException("a digest sink cannot fail", e);
    }
    return HexFormat.of().formatHex(total.digest());
  }

  static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("this JVM has no SHA-256", e);
    }
  }
}
