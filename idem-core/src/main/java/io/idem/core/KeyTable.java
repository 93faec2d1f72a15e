package io.idem.core;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.DigestException;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;

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

  private static final int MAGIC = 0x49444b59; // "IDKY"

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

    /** Its records. */
    public int records() {
      return records;
    }

    /** Their bytes. */
    public long bytes() {
      return bytes;
    }
  }

  private static final Usage NO_USAGE = new Usage();

  /** What complete, release and renew answer. */
  public sealed interface Settlement {
    /** Done; for a renew, the new deadline (else 0). */
    record Done(long deadline) implements Settlement {}

    /** The token is not the key's current one ({@code current}, 0 if the key has no owner). */
    record Fenced(long current) implements Settlement {}

    /** Refused as invalid (a bound); nothing changed. */
    record Invalid(String reason) implements Settlement {}
  }

  /**
   * One key's record. Completed records have {@code response != null}. A record of an older
   * generation than the table's may be in a frozen copy that a writer thread is reading: it is
   * copied before it changes ({@link #writable}).
   */
  private static final class Record {
    final KeyId id;
    final byte[] fingerprint;
    long generation;
    int slot; // its index in the table's array of records; never read by a frozen copy's writer
    long token;
    long deadline;
    long retentionMs;
    byte[] response;
    long completedAt;
    String owner; // who acquired it, charged for it; null: nobody

    Record(KeyId id, byte[] fingerprint) {
      this.id = id;
      this.fingerprint = fingerprint;
    }

    /**
     * The bytes it holds that callers chose: key, scope (2 bytes a char), fingerprint, response.
     */
    long footprint() {
      return 2L * (id.scope().length() + id.key().length())
          + fingerprint.length
          + (response == null ? 0 : response.length);
    }

    /** A copy of its fields now; the byte arrays are never changed in place, so they are shared. */
    Record copy() {
      Record c = new Record(id, fingerprint);
      c.token = token;
      c.deadline = deadline;
      c.retentionMs = retentionMs;
      c.response = response;
      c.completedAt = completedAt;
      c.owner = owner;
      return c;
    }

    /** When the record is dropped: retention after completion, or after the owner's deadline. */
    long expiresAt() {
      return (response != null ? completedAt : deadline) + retentionMs;
    }
  }

  /**
   * The expiry index's order: by the time a record is dropped, then by token, which no two records
   * share (equal times are common: every command of a log entry has its time). Which of the records
   * due together goes first changes nothing, since {@link #expire} drops them all; a token compares
   * cheaply, where a key took a string comparison on the apply thread. A record leaves the index
   * before either field changes and comes back after.
   */
  private static final Comparator<Record> BY_EXPIRY =
      Comparator.comparingLong(Record::expiresAt).thenComparingLong(r -> r.token);

  /** The fingerprint of every record acquired without one. */
  private static final byte[] NO_FINGERPRINT = new byte[0];

  private final Bounds bounds;
  // The records by key: a hash map, not a sorted one (docs/PERFORMANCE.md, "Keys: a hash map").
  private final Map<KeyId, Record> records = new HashMap<>();
  // The same records, packed at the front of an array (each knows its slot), so that a freeze
  // copies one array instead of walking the hash map: 5-6 ms instead of 90 ms at 820,000 records
  // (KeySnapshotBenchmark, docs/PERFORMANCE.md). Their order is the snapshot's: a new record goes
  // last and the last one moves into a freed slot, so it follows from the commands applied alone.
  private Record[] packed = new Record[16];
  // The records again, in the order they expire. It holds the records themselves: an entry of its
  // own, with the key, held a second copy of the key (the one a complete was decoded with) and
  // made every record a third heavier for the collector to copy (docs/PERFORMANCE.md).
  private final TreeSet<Record> expiry = new TreeSet<>(BY_EXPIRY);
  private long lastToken;
  // Bumped by freeze(): every record of an older generation may be shared with a frozen copy.
  private long generation;
  private long bytes; // the sum of the records' footprints
  private final Map<String, Usage> usage = new HashMap<>(); // by owner
  private int ownedRecords;

  /** An empty table with {@code bounds}. */
  public KeyTable(Bounds bounds) {
    this.bounds = bounds;
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
    Record r = records.get(id);
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
      Usage mine = owner == null ? NO_USAGE : usageOf(owner);
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
          new Record(
              new KeyId(id.scope().intern(), id.key()),
              fingerprint.length == 0 ? NO_FINGERPRINT : fingerprint.clone());
      r.generation = generation;
      r.owner = owner;
      add(r);
    } else {
      expiry.remove(r);
      r = writable(r);
    }
    lastToken = token;
    r.token = token;
    r.deadline = now + inProgressMs;
    r.retentionMs = retentionMs;
    expiry.add(r);
    return new Acquisition.Acquired(token, r.deadline, takeover);
  }

  /** Completes {@code id} with {@code response} if {@code token} still owns it. */
  public Settlement complete(KeyId id, long token, byte[] response, long now) {
    if (response == null || response.length > bounds.maxResponseBytes()) {
      return new Settlement.Invalid(
          "response must be at most " + bounds.maxResponseBytes() + " bytes");
    }
    expire(now);
    Record r = owned(id, token);
    if (r == null) {
      return fenced(id);
    }
    expiry.remove(r);
    r = writable(r);
    r.response = response.clone();
    bytes += response.length;
    if (r.owner != null) {
      usage.get(r.owner).bytes += response.length;
    }
    r.completedAt = now;
    expiry.add(r);
    return new Settlement.Done(0);
  }

  /** Drops {@code id} if {@code token} still owns it: the business step failed and did nothing. */
  public Settlement release(KeyId id, long token, long now) {
    expire(now);
    Record r = owned(id, token);
    if (r == null) {
      return fenced(id);
    }
    remove(r);
    return new Settlement.Done(0);
  }

  /** Moves the owner's deadline to {@code now + extensionMs} if {@code token} still owns it. */
  public Settlement renew(KeyId id, long token, long extensionMs, long now) {
    if (extensionMs < 1 || extensionMs > bounds.maxRetentionMs()) {
      return new Settlement.Invalid("extension must be in [1, " + bounds.maxRetentionMs() + "] ms");
    }
    expire(now);
    Record r = owned(id, token);
    if (r == null) {
      return fenced(id);
    }
    expiry.remove(r);
    r = writable(r);
    r.deadline = now + extensionMs;
    expiry.add(r);
    return new Settlement.Done(r.deadline);
  }

  /**
   * The token a fenced write on {@code id} is judged against: the current owner's, or the token the
   * key was completed under; 0 if the key has no record. A write fenced with a smaller token is
   * from a stale owner and must be refused.
   */
  public long currentToken(KeyId id) {
    Record r = records.get(id);
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
    Record r = records.get(id);
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
    Record r = records.get(id);
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
    Record r = records.get(id);
    return r != null && r.token == token && now <= r.deadline;
  }

  /** Drops every record whose retention ended before {@code now}; returns how many. */
  public int expire(long now) {
    int n = 0;
    while (!expiry.isEmpty() && expiry.first().expiresAt() < now) {
      drop(expiry.pollFirst());
      n++;
    }
    return n;
  }

  /** How many records the table holds. */
  public int size() {
    return records.size();
  }

  /** The bytes its records hold that callers chose (keys, fingerprints, responses). */
  public long bytes() {
    return bytes;
  }

  /** What {@code owner}'s records hold (a live view: read it before the table changes). */
  public Usage usageOf(String owner) {
    Usage u = usage.get(owner);
    return u == null ? NO_USAGE : u;
  }

  private Record owned(KeyId id, long token) {
    Record r = records.get(id);
    return r != null && r.response == null && r.token == token ? r : null;
  }

  /**
   * {@code r}, or, if a frozen copy may share it (an older generation), a copy of it that replaces
   * it in the table: what a writer thread reads never changes under it.
   */
  private Record writable(Record r) {
    if (r.generation == generation) {
      return r;
    }
    Record c = r.copy();
    c.generation = generation;
    c.slot = r.slot;
    packed[c.slot] = c;
    records.put(c.id, c);
    return c;
  }

  private Settlement fenced(KeyId id) {
    Record r = records.get(id);
    return new Settlement.Fenced(r == null || r.response != null ? 0 : r.token);
  }

  private void remove(Record r) {
    expiry.remove(r);
    drop(r);
  }

  /** Adds a new record: to the map, and at the end of the packed array. */
  private void add(Record r) {
    int n = records.size();
    if (n == packed.length) {
      packed = Arrays.copyOf(packed, 2 * n);
    }
    r.slot = n;
    packed[n] = r;
    records.put(r.id, r);
    bytes += r.footprint();
    if (r.owner != null) {
      Usage u = usage.computeIfAbsent(r.owner, o -> new Usage());
      u.records++;
      u.bytes += r.footprint();
      ownedRecords++;
    }
  }

  /**
   * Drops a record: from the map, and from the packed array, whose last record moves into its slot.
   * The array shrinks by half once it is a quarter full.
   */
  private void drop(Record r) {
    records.remove(r.id);
    bytes -= r.footprint();
    if (r.owner != null) {
      Usage u = usage.get(r.owner);
      u.records--;
      u.bytes -= r.footprint();
      if (u.records == 0) {
        usage.remove(r.owner);
      }
      ownedRecords--;
    }
    int last = records.size();
    Record moved = packed[last];
    packed[r.slot] = moved;
    moved.slot = r.slot;
    packed[last] = null;
    if (packed.length > 16 && last <= packed.length / 4) {
      packed = Arrays.copyOf(packed, packed.length / 2);
    }
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

  // ---- snapshot and digest ----

  /**
   * Writes the table: magic, version, bounds, the last token, the records in the table's order,
   * then a CRC32C of everything before. Leaves {@code out} open.
   */
  public void writeSnapshot(OutputStream out) throws IOException {
    write(
        new SnapshotEncoder(out::write),
        bounds,
        lastToken,
        packed,
        records.size(),
        ownedRecords > 0);
  }

  /**
   * A copy of the table as it is now, cheap to take, that writes exactly what {@link
   * #writeSnapshot} would have written now, however the table changes afterwards. The server takes
   * it under its state lock and writes it off the apply thread. It holds the records themselves,
   * not copies (the table copies a record before it next changes one of them instead), in a copy of
   * the packed array of records: no walk of the hash map (docs/PERFORMANCE.md).
   */
  public Frozen freeze() {
    generation++;
    return new Frozen(bounds, lastToken, Arrays.copyOf(packed, records.size()), ownedRecords > 0);
  }

  /**
   * A table's state as of {@link #freeze}: it writes the table's snapshot, and tells its size
   * before and its digest after, without encoding the records again for either.
   */
  public static final class Frozen {
    private final Bounds bounds;
    private final long lastToken;
    private final Record[] records; // in the table's order when frozen
    private final boolean owned; // whether any record has an owner: version 3, else 2
    private String digest; // taken by the first write, or by the first call of digest()

    private Frozen(Bounds bounds, long lastToken, Record[] records, boolean owned) {
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
        digest = digestOf(bounds, lastToken, records, records.length, owned);
      }
      return digest;
    }

    /**
     * Writes the table's snapshot as {@link KeyTable#writeSnapshot} did when frozen, exactly {@link
     * #snapshotBytes} bytes, taking its {@link #digest} on the way.
     */
    public synchronized void writeSnapshot(OutputStream out) throws IOException {
      digest =
          write(new SnapshotEncoder(out::write), bounds, lastToken, records, records.length, owned);
    }

    /**
     * The length of {@link #writeSnapshot}'s output, counted from the records' fields instead of
     * encoded: a framed section states its length before its bytes.
     */
    public synchronized long snapshotBytes() {
      long n = 5 * Integer.BYTES + 2 * Long.BYTES + Integer.BYTES; // header, bounds, token, count
      for (Record r : records) {
        n += 3 * Integer.BYTES + utf8Length(r.id.scope()) + utf8Length(r.id.key());
        n += r.fingerprint.length + 4 * Long.BYTES + Integer.BYTES;
        n += r.response == null ? 0 : r.response.length;
        if (owned) {
          n += Integer.BYTES + (r.owner == null ? 0 : utf8Length(r.owner));
        }
      }
      return n + Integer.BYTES; // the CRC32C
    }
  }

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
   * Writes the records {@code records[0..count)} in that order as a snapshot, and returns their
   * {@link #digest}, taken from the same encoding of each record.
   */
  private static String write(
      SnapshotEncoder e, Bounds bounds, long lastToken, Record[] records, int count, boolean owned)
      throws IOException {
    writeHeader(e, versionFor(owned), bounds, lastToken, count);
    RecordHashes hashes = new RecordHashes(owned);
    for (int i = 0; i < count; i++) {
      ByteBuffer encoded = hashes.add(records[i]);
      e.putRaw(encoded.array(), 0, encoded.position());
    }
    e.finish();
    return hashes.digest(bounds, lastToken, count);
  }

  private static int versionFor(boolean owned) {
    return owned ? SNAPSHOT_VERSION : UNOWNED_VERSION;
  }

  private static void writeHeader(
      SnapshotEncoder e, int version, Bounds bounds, long lastToken, int count) throws IOException {
    e.putInt(MAGIC);
    e.putInt(version);
    e.putInt(bounds.maxKeyChars());
    e.putInt(bounds.maxFingerprintBytes());
    e.putInt(bounds.maxResponseBytes());
    e.putLong(bounds.maxRetentionMs());
    e.putLong(lastToken);
    e.putInt(count);
  }

  private static String digestOf(
      Bounds bounds, long lastToken, Record[] records, int count, boolean owned) {
    RecordHashes hashes = new RecordHashes(owned);
    for (int i = 0; i < count; i++) {
      hashes.add(records[i]);
    }
    return hashes.digest(bounds, lastToken, count);
  }

  /**
   * The digest of a table whatever the order of its records: each record is encoded as the snapshot
   * encodes it and hashed (SHA-256) on its own, the hashes are added up modulo 2^256, and the
   * digest is the SHA-256 of the snapshot's header (magic, version, bounds, last token, count)
   * followed by that sum. Keys are unique, so equal tables give equal sums in any order. Hashing
   * each record costs less than the sort that a digest of one stream in key order needs: 1.4-1.8 s
   * of the writer's 2 s at 820,000 records with random keys (docs/PERFORMANCE.md, tenth sitting).
   */
  private static final class RecordHashes {
    private final MessageDigest sha = sha256();
    private final byte[] hash = new byte[32];
    private final ByteBuffer hashView = ByteBuffer.wrap(hash);
    private final long[] sum = new long[4]; // big-endian: sum[0] holds the most significant bits
    private ByteBuffer encoded = ByteBuffer.allocate(512);
    private String scope; // the last record's scope (interned: most records share a few) ...
    private byte[] scopeBytes; // ... and its encoding
    private final boolean owned; // version 3: each record ends with its owner

    RecordHashes(boolean owned) {
      this.owned = owned;
    }

    /** Encodes {@code r}, adds its hash, and returns the encoding (until the next call). */
    ByteBuffer add(Record r) {
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
    String digest(Bounds bounds, long lastToken, int count) {
      MessageDigest total = sha256();
      SnapshotEncoder header = new SnapshotEncoder(total::update);
      try {
        writeHeader(header, versionFor(owned), bounds, lastToken, count);
        for (long lane : sum) {
          header.putLong(lane);
        }
        header.flushWithoutChecksum();
      } catch (IOException e) {
        throw new IllegalStateException("a digest sink cannot fail", e);
      }
      return HexFormat.of().formatHex(total.digest());
    }
  }

  /**
   * Reads a table written by {@link #writeSnapshot}, exactly its bytes.
   *
   * @throws SnapshotFormatException if the input is corrupt, truncated, of an unknown version, or
   *     fails its checksum; no table is returned then
   */
  public static KeyTable readSnapshot(InputStream in) throws IOException {
    SnapshotDecoder d = new SnapshotDecoder(in);
    if (d.getInt() != MAGIC) {
      throw new SnapshotFormatException("not a key table snapshot");
    }
    int version = d.getInt();
    if (version != SNAPSHOT_VERSION && version != UNOWNED_VERSION && version != KEY_ORDER_VERSION) {
      throw new SnapshotFormatException("unknown key table snapshot version " + version);
    }
    KeyTable t;
    try {
      t = new KeyTable(new Bounds(d.getInt(), d.getInt(), d.getInt(), d.getLong()));
    } catch (IllegalArgumentException e) {
      throw new SnapshotFormatException("bad bounds: " + e.getMessage());
    }
    t.lastToken = d.getLong();
    int n = d.getInt();
    if (n < 0) {
      throw new SnapshotFormatException("negative record count " + n);
    }
    int maxChars = t.bounds.maxKeyChars() * 4; // UTF-8 bytes
    KeyId previous = null;
    for (int i = 0; i < n; i++) {
      KeyId id = new KeyId(text(d, maxChars, "scope").intern(), text(d, maxChars, "key"));
      Record r = new Record(id, d.getBytes(t.bounds.maxFingerprintBytes(), "fingerprint"));
      r.token = d.getLong();
      r.deadline = d.getLong();
      r.retentionMs = d.getLong();
      r.completedAt = d.getLong();
      int maxResponse = t.bounds.maxResponseBytes();
      r.response = d.getBytes(maxResponse, "response");
      if (version >= SNAPSHOT_VERSION) {
        byte[] owner = d.getBytes(SessionTable.MAX_PRINCIPAL_BYTES, "owner");
        r.owner = owner == null ? null : new String(owner, StandardCharsets.UTF_8);
      }
      if (r.fingerprint == null
          || r.token < 1
          || r.token > t.lastToken
          || r.retentionMs < 1
          || (version == KEY_ORDER_VERSION && previous != null && previous.compareTo(id) >= 0)
          || t.records.containsKey(id)) { // each key once (and version 1 in key order)
        throw new SnapshotFormatException("bad key record " + i);
      }
      previous = id;
      t.add(r);
      t.expiry.add(r);
    }
    // The expiry index tells records apart by token: no two may share one.
    long[] tokens = new long[t.records.size()];
    int at = 0;
    for (Record r : t.records.values()) {
      tokens[at++] = r.token;
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

  /**
   * A SHA-256 over the table's bounds, last token and records, in hex: equal for equal tables,
   * whatever the order of their records ({@link RecordHashes}).
   */
  public String digest() {
    return digestOf(bounds, lastToken, packed, records.size(), ownedRecords > 0);
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("this JVM has no SHA-256", e);
    }
  }
}
