package io.idem.core;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Arrays;
import java.util.Optional;

/**
 * Application idempotency keys (seed 001, with its defects fixed): the deterministic record of each
 * {@code (scope, key)}, replicated through the log like the session table. A record is in progress
 * (its owner's fencing token and deadline) or completed (the stored response), and expires after
 * its retention period:
 *
 * <pre>
 * absent --acquire--> IN_PROGRESS{token, deadline, fingerprint}
 * IN_PROGRESS --complete(token)--> COMPLETED{response, fingerprint}   (kept for the retention)
 * IN_PROGRESS --release(token)--> absent                            (the step failed, did nothing)
 * IN_PROGRESS --renew(token)--> IN_PROGRESS{deadline'}
 * IN_PROGRESS --acquire after the deadline--> IN_PROGRESS{token' > token}   (a takeover)
 * any transition with a token that is not the current one --> FENCED, nothing changes
 * acquire with another fingerprint --> MISMATCH, nothing changes
 * </pre>
 *
 * <p>Determinism: time is the caller's log time, and tokens are supplied by the caller from the log
 * (the server uses the command's log position), so every replica decides the same and a token is
 * strictly greater than every token handed out before it, for any key, across failovers, restarts
 * and snapshots. Snapshots list the records in the table's own order, which every replica shares
 * (it follows from the commands applied, and a table read from a snapshot keeps the snapshot's);
 * the digest does not depend on any order (see {@link #digest}).
 *
 * <p>Validate, then commit does not apply here: every operation decides and commits in one step,
 * and a refusal changes nothing. Not thread-safe: the state machine applies the log on one thread.
 */
public final class KeyTable {

  /**
   * Format version of {@link #writeSnapshot}: 3 adds each record's owner; 2 lists the records in
   * the table's order; 1 (still read) listed them in key order, which cost the snapshot writer a
   * sort of every record. A table without owned records is written as version 2, so that a table
   * that only ownerless acquires built (the server's log formats before 7) keeps its bytes and
   * digest.
   */
  public static final int SNAPSHOT_VERSION = 3;

  /** The version without owners, in the table's order. */
  static final int UNOWNED_VERSION = 2;

  /** The version that listed the records in key order. */
  static final int KEY_ORDER_VERSION = 1;

  /** The bounds of a key table; part of the replicated state, like the session table's. */
  public record Bounds(
      int maxKeyChars, int maxFingerprintBytes, int maxResponseBytes, long maxRetentionMs) {
    /** Default bounds: keys of 255 characters, 64-byte fingerprints, 64 KiB responses, 7 days. */
    public static final Bounds DEFAULTS = new Bounds(255, 64, 64 * 1024, 7L * 86_400_000L);

    /** Validates every bound and names the bad one. */
    public Bounds {
      if (maxKeyChars < 1 || maxKeyChars > 4096) {
        throw new IllegalArgumentException("maxKeyChars must be in [1, 4096], got " + maxKeyChars);
      }
      if (maxFingerprintBytes < 0 || maxFingerprintBytes > 1024) {
        throw new IllegalArgumentException(
            "maxFingerprintBytes must be in [0, 1024], got " + maxFingerprintBytes);
      }
      if (maxResponseBytes < 0 || maxResponseBytes > SessionTable.MAX_RESPONSE_BYTES) {
        throw new IllegalArgumentException(
            "maxResponseBytes must be in [0, "
                + SessionTable.MAX_RESPONSE_BYTES
                + "], got "
                + maxResponseBytes);
      }
      if (maxRetentionMs < 1 || maxRetentionMs > SessionTableConfig.MAX_TTL_LIMIT_MS) {
        throw new IllegalArgumentException(
            "maxRetentionMs must be in [1, 2^40], got " + maxRetentionMs);
      }
    }
  }

  /** A key within its scope (a tenant or a principal). */
  public record KeyId(String scope, String key) implements Comparable<KeyId> {
    /** Both parts required. */
    public KeyId {
      if (scope == null || key == null) {
        throw new IllegalArgumentException("scope and key must not be null");
      }
    }

    @Override
    public int compareTo(KeyId o) {
      int c = scope.compareTo(o.scope);
      return c != 0 ? c : key.compareTo(o.key);
    }
  }

  /**
   * How much a table may hold: new keys are refused ({@link Acquisition.Full}) once it holds {@code
   * maxRecords} records or {@code maxBytes} of keys, fingerprints and responses. Not part of the
   * snapshot: the caller passes the capacity its rules give (the server's are tied to a log format
   * version), so every replica decides with the same one.
   */
  public record Capacity(int maxRecords, long maxBytes) {
    /** No limit: for callers whose records are bounded otherwise (tests, models). */
    public static final Capacity UNLIMITED = new Capacity(Integer.MAX_VALUE, Long.MAX_VALUE);

    /** Validates both. */
    public Capacity {
      if (maxRecords < 1 || maxBytes < 1) {
        throw new IllegalArgumentException(
            "capacity must be positive, got " + maxRecords + " records, " + maxBytes + " bytes");
      }
    }
  }

  /** What an acquire answers: exactly one of four, or a refusal of a bad or an excess request. */
  public sealed interface Acquisition {
    /** The caller owns the key until {@code deadline} (log time), under {@code token}. */
    record Acquired(long token, long deadline, boolean takeover) implements Acquisition {}

    /** The key was completed: replay {@code response}. Equal by content. */
    record Completed(byte[] response, long completedAt) implements Acquisition {
      @Override
      public boolean equals(Object o) {
        return o instanceof Completed c
            && completedAt == c.completedAt
            && Arrays.equals(response, c.response);
      }

      @Override
      public int hashCode() {
        return 31 * Arrays.hashCode(response) + Long.hashCode(completedAt);
      }

      @Override
      public String toString() {
        return "Completed[" + response.length + " bytes, completedAt=" + completedAt + "]";
      }
    }

    /** Another owner holds the key until {@code deadline} (log time). */
    record InProgress(long deadline) implements Acquisition {}

    /** The key was used with another fingerprint. Nothing changed. */
    record Mismatch() implements Acquisition {}

    /** Refused as invalid (a bound); nothing changed. */
    record Invalid(String reason) implements Acquisition {}

    /** A new key, refused because the table is at its capacity; nothing changed. */
    record Full(String reason) implements Acquisition {}

    /** A new key, refused because its owner is at its quota; nothing changed. */
    record OverQuota(String reason) implements Acquisition {}
  }

  /**
   * What one owner's records hold: how many, and their {@link #bytes()} (keys, fingerprints,
   * responses). Derived from the records (a restored table recomputes it). Read-only outside.
   */
  public static final class Usage {
    int records;
    long bytes;

    Usage() {} // made by the table only: read-only outside the package

    /** Its records. */
    public int records() {
      return records;
    }

    /** Their bytes. */
    public long bytes() {
      return bytes;
    }
  }

  /** What complete, release and renew answer. */
  public sealed interface Settlement {
    /** Done; for a renew, the new deadline (else 0). */
    record Done(long deadline) implements Settlement {}

    /** The token is not the key's current one ({@code current}, 0 if the key has no owner). */
    record Fenced(long current) implements Settlement {}

    /** Refused as invalid (a bound); nothing changed. */
    record Invalid(String reason) implements Settlement {}
  }

  /** The fingerprint of every record acquired without one. */
  private static final byte[] NO_FINGERPRINT = new byte[0];

  private final Bounds bounds;
  private final KeyRecords records = new KeyRecords();
  private long lastToken;

  /** An empty table with {@code bounds}. */
  public KeyTable(Bounds bounds) {
    this.bounds = bounds;
  }

  /** A table to restore from a snapshot: no records yet, and the last token handed out. */
  KeyTable(Bounds bounds, long lastToken) {
    this.bounds = bounds;
    this.lastToken = lastToken;
  }

  /** The bounds. */
  public Bounds bounds() {
    return bounds;
  }

  // ---- operations ----

  /**
   * Acquires {@code id} for {@code inProgressMs} of log time under {@code token}, or answers what
   * holds it. Records due at {@code now} are expired first.
   *
   * @param token from the log, greater than every token given to this table before
   * @param retentionMs how long the record is kept after its completion (or its owner's deadline)
   * @throws IllegalArgumentException if {@code token} does not grow: a bug of the caller
   */
  public Acquisition acquire(
      KeyId id, byte[] fingerprint, long inProgressMs, long retentionMs, long token, long now) {
    return acquire(id, fingerprint, inProgressMs, retentionMs, token, now, Capacity.UNLIMITED);
  }

  /**
   * As {@link #acquire(KeyId, byte[], long, long, long, long)}, refusing a new key with {@link
   * Acquisition.Full} while the table is at {@code capacity} (after expiring what is due). Existing
   * keys are answered as ever: a takeover adds no record.
   */
  public Acquisition acquire(
      KeyId id,
      byte[] fingerprint,
      long inProgressMs,
      long retentionMs,
      long token,
      long now,
      Capacity capacity) {
    return acquire(id, fingerprint, inProgressMs, retentionMs, token, now, capacity, null, null);
  }

  /**
   * As {@link #acquire(KeyId, byte[], long, long, long, long, Capacity)}, charging a new record to
   * {@code owner} (null: nobody) and refusing it with {@link Acquisition.OverQuota} while the
   * owner's records are at {@code quota} (null: none). A takeover keeps the record's owner.
   */
  public Acquisition acquire(
      KeyId id,
      byte[] fingerprint,
      long inProgressMs,
      long retentionMs,
      long token,
      long now,
      Capacity capacity,
      String owner,
      Capacity quota) {
    String bad = check(id, fingerprint, retentionMs);
    if (bad == null && (inProgressMs < 1 || inProgressMs > bounds.maxRetentionMs())) {
      bad = "in-progress timeout must be in [1, " + bounds.maxRetentionMs() + "] ms";
    }
    if (bad != null) {
      return new Acquisition.Invalid(bad);
    }
    if (token <= lastToken) {
      throw new IllegalArgumentException("token " + token + " after " + lastToken);
    }
    expire(now);
    KeyRecord r = records.get(id);
    if (r != null && !Arrays.equals(r.fingerprint, fingerprint)) {
      return new Acquisition.Mismatch();
    }
    if (r != null && r.response != null) {
      return new Acquisition.Completed(r.response.clone(), r.completedAt);
    }
    if (r != null && r.deadline >= now) { // the owner holds the key up to its deadline, inclusive
      return new Acquisition.InProgress(r.deadline);
    }
    boolean takeover = r != null;
    if (r == null) {
      long adding = 2L * (id.scope().length() + id.key().length()) + fingerprint.length;
      long bytes = records.bytes();
      if (records.size() >= capacity.maxRecords() || bytes + adding > capacity.maxBytes()) {
        return new Acquisition.Full(
            "the key table is full ("
                + records.size()
                + " records, "
                + bytes
                + " bytes; at most "
                + capacity.maxRecords()
                + " records and "
                + capacity.maxBytes()
                + " bytes): retry after records expire");
      }
      Usage mine = usageOf(owner);
      if (quota != null
          && (mine.records >= quota.maxRecords() || mine.bytes + adding > quota.maxBytes())) {
        return new Acquisition.OverQuota(
            "quota key_records or key_bytes of \""
                + owner
                + "\": it holds "
                + mine.records
                + " records of "
                + mine.bytes
                + " bytes; at most "
                + quota.maxRecords()
                + " records and "
                + quota.maxBytes()
                + " bytes: retry after its records expire");
      }
      // A scope is shared by many keys: its records share one copy of it (the JVM's string table
      // lets it go once no record holds it).
      r =
          new KeyRecord(
              new KeyId(id.scope().intern(), id.key()),
              fingerprint.length == 0 ? NO_FINGERPRINT : fingerprint.clone());
      r.owner = owner;
      records.insert(r);
    } else {
      r = records.edit(r);
    }
    lastToken = token;
    r.token = token;
    r.deadline = now + inProgressMs;
    r.retentionMs = retentionMs;
    records.indexExpiry(r);
    return new Acquisition.Acquired(token, r.deadline, takeover);
  }

  /** Completes {@code id} with {@code response} if {@code token} still owns it. */
  public Settlement complete(KeyId id, long token, byte[] response, long now) {
    if (response == null || response.length > bounds.maxResponseBytes()) {
      return new Settlement.Invalid(
          "response must be at most " + bounds.maxResponseBytes() + " bytes");
    }
    expire(now);
    KeyRecord r = owned(id, token);
    if (r == null) {
      return fenced(id);
    }
    r = records.edit(r);
    r.response = response.clone();
    records.charge(r, response.length);
    r.completedAt = now;
    records.indexExpiry(r);
    return new Settlement.Done(0);
  }

  /** Drops {@code id} if {@code token} still owns it: the business step failed and did nothing. */
  public Settlement release(KeyId id, long token, long now) {
    expire(now);
    KeyRecord r = owned(id, token);
    if (r == null) {
      return fenced(id);
    }
    records.remove(r);
    return new Settlement.Done(0);
  }

  /** Moves the owner's deadline to {@code now + extensionMs} if {@code token} still owns it. */
  public Settlement renew(KeyId id, long token, long extensionMs, long now) {
    if (extensionMs < 1 || extensionMs > bounds.maxRetentionMs()) {
      return new Settlement.Invalid("extension must be in [1, " + bounds.maxRetentionMs() + "] ms");
    }
    expire(now);
    KeyRecord r = owned(id, token);
    if (r == null) {
      return fenced(id);
    }
    r = records.edit(r);
    r.deadline = now + extensionMs;
    records.indexExpiry(r);
    return new Settlement.Done(r.deadline);
  }

  /**
   * The token a fenced write on {@code id} is judged against: the current owner's, or the token the
   * key was completed under; 0 if the key has no record. A write fenced with a smaller token is
   * from a stale owner and must be refused.
   */
  public long currentToken(KeyId id) {
    KeyRecord r = records.get(id);
    return r == null ? 0 : r.token;
  }

  /**
   * A key's record as a reader sees it.
   *
   * @param token the owner's token, or the one the key was completed under
   * @param deadline the owner's deadline (kept after completion)
   * @param completed whether the key was completed
   * @param completedAt when it was completed, 0 if not
   * @param expiresAt when the record is dropped
   * @param fingerprint the fingerprint it was acquired with (a copy)
   * @param response the stored response (a copy), empty if not completed
   */
  public record View(
      long token,
      long deadline,
      boolean completed,
      long completedAt,
      long expiresAt,
      byte[] fingerprint,
      byte[] response) {}

  /**
   * The record of {@code id} as of {@code now}, without changing the table: empty if there is none
   * or its retention ended before {@code now} (due, though not yet dropped).
   */
  public Optional<View> view(KeyId id, long now) {
    KeyRecord r = records.get(id);
    if (r == null || r.expiresAt() < now) {
      return Optional.empty();
    }
    return Optional.of(
        new View(
            r.token,
            r.deadline,
            r.response != null,
            r.response != null ? r.completedAt : 0,
            r.expiresAt(),
            r.fingerprint.clone(),
            r.response != null ? r.response.clone() : new byte[0]));
  }

  /** Whether {@code token} owns {@code id} in progress: complete, release and renew may apply. */
  public boolean isOwner(KeyId id, long token) {
    return owned(id, token) != null;
  }

  /**
   * Whether {@code token} is the token of {@code id}'s record (in progress or completed): the
   * condition under which a fenced write goes through in log formats 5 to 7 (from format 8, {@link
   * #holds(KeyId, long, long)}). False without a record.
   */
  public boolean holds(KeyId id, long token) {
    KeyRecord r = records.get(id);
    return r != null && r.token == token;
  }

  /**
   * Whether {@code token} holds {@code id} at log time {@code now}: it is the token of the key's
   * record (in progress or completed) and {@code now} is at or before the owner's deadline, the
   * last instant at which {@link #acquire} answers {@link Acquisition.InProgress}. A token holds
   * its key as a lease is held, whether or not anyone took the key over since the deadline. False
   * without a record.
   */
  public boolean holds(KeyId id, long token, long now) {
    KeyRecord r = records.get(id);
    return r != null && r.token == token && now <= r.deadline;
  }

  /** Drops every record whose retention ended before {@code now}; returns how many. */
  public int expire(long now) {
    return records.expire(now);
  }

  /** How many records the table holds. */
  public int size() {
    return records.size();
  }

  /** The bytes its records hold that callers chose (keys, fingerprints, responses). */
  public long bytes() {
    return records.bytes();
  }

  /** What {@code owner}'s records hold (a live view: read it before the table changes). */
  public Usage usageOf(String owner) {
    return records.usageOf(owner);
  }

  private KeyRecord owned(KeyId id, long token) {
    KeyRecord r = records.get(id);
    return r != null && r.response == null && r.token == token ? r : null;
  }

  private Settlement fenced(KeyId id) {
    KeyRecord r = records.get(id);
    return new Settlement.Fenced(r == null || r.response != null ? 0 : r.token);
  }

  private String check(KeyId id, byte[] fingerprint, long retentionMs) {
    if (id.scope().length() > bounds.maxKeyChars() || id.key().isEmpty()) {
      return "scope must have at most " + bounds.maxKeyChars() + " characters, key at least one";
    }
    if (id.key().length() > bounds.maxKeyChars()) {
      return "key is " + id.key().length() + " characters, the limit is " + bounds.maxKeyChars();
    }
    if (fingerprint == null || fingerprint.length > bounds.maxFingerprintBytes()) {
      return "fingerprint must be at most " + bounds.maxFingerprintBytes() + " bytes";
    }
    if (retentionMs < 1 || retentionMs > bounds.maxRetentionMs()) {
      return "retention must be in [1, " + bounds.maxRetentionMs() + "] ms, got " + retentionMs;
    }
    return null;
  }

  /** The table's records, for the codec ({@link KeyTableCodec}) to restore them into. */
  KeyRecords records() {
    return records;
  }

  // ---- snapshot and digest ----

  /**
   * Writes the table: magic, version, bounds, the last token, the records in the table's order,
   * then a CRC32C of everything before. Leaves {@code out} open.
   */
  public void writeSnapshot(OutputStream out) throws IOException {
    KeyTableCodec.write(
        new SnapshotEncoder(out::write),
        bounds,
        lastToken,
        records.inOrder(),
        records.size(),
        records.anyOwned());
  }

  /**
   * A copy of the table as it is now, cheap to take, that writes exactly what {@link
   * #writeSnapshot} would have written now, however the table changes afterwards. The server takes
   * it under its state lock and writes it off the apply thread. It holds the records themselves,
   * not copies (the table copies a record before it next changes one of them instead), in a copy of
   * the packed array of records: no walk of the hash map (docs/PERFORMANCE.md).
   */
  public Frozen freeze() {
    boolean owned = records.anyOwned();
    return new Frozen(bounds, lastToken, records.freeze(), owned);
  }

  /**
   * A table's state as of {@link #freeze}: it writes the table's snapshot, and tells its size
   * before and its digest after, without encoding the records again for either.
   */
  public static final class Frozen {
    private final Bounds bounds;
    private final long lastToken;
    private final KeyRecord[] records; // in the table's order when frozen
    private final boolean owned; // whether any record has an owner: version 3, else 2
    private String digest; // taken by the first write, or by the first call of digest()

    private Frozen(Bounds bounds, long lastToken, KeyRecord[] records, boolean owned) {
      this.bounds = bounds;
      this.lastToken = lastToken;
      this.records = records;
      this.owned = owned;
    }

    /**
     * The table's {@link KeyTable#digest} as it was when frozen: taken while {@link #writeSnapshot}
     * wrote, or else by encoding the records now.
     */
    public synchronized String digest() {
      if (digest == null) {
        digest = KeyTableCodec.digestOf(bounds, lastToken, records, records.length, owned);
      }
      return digest;
    }

    /**
     * Writes the table's snapshot as {@link KeyTable#writeSnapshot} did when frozen, exactly {@link
     * #snapshotBytes} bytes, taking its {@link #digest} on the way.
     */
    public synchronized void writeSnapshot(OutputStream out) throws IOException {
      digest =
          KeyTableCodec.write(
              new SnapshotEncoder(out::write), bounds, lastToken, records, records.length, owned);
    }

    /**
     * The length of {@link #writeSnapshot}'s output, counted from the records' fields instead of
     * encoded: a framed section states its length before its bytes.
     */
    public synchronized long snapshotBytes() {
      return KeyTableCodec.snapshotBytes(records, owned);
    }
  }

  /**
   * Reads a table written by {@link #writeSnapshot}, exactly its bytes.
   *
   * @throws SnapshotFormatException if the input is corrupt, truncated, of an unknown version, or
   *     fails its checksum; no table is returned then
   */
  public static KeyTable readSnapshot(InputStream in) throws IOException {
    return KeyTableCodec.readSnapshot(in);
  }

  /**
   * A SHA-256 over the table's bounds, last token and records, in hex: equal for equal tables,
   * whatever the order of their records ({@link KeyRecordHashes}).
   */
  public String digest() {
    return KeyTableCodec.digestOf(
        bounds, lastToken, records.inOrder(), records.size(), records.anyOwned());
  }
}
