package io.idem.core;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;

/**
 * The records of a {@link KeyTable}, indexed three ways (by key, packed in the snapshot's order, by
 * expiry), and what they hold (bytes, records by owner). A record a frozen copy may share is copied
 * before it changes ({@link #edit}). Not thread-safe: the table's thread owns it.
 */
final class KeyRecords {

  private static final KeyTable.Usage NO_USAGE = new KeyTable.Usage();

  // The records by key: a hash map, not a sorted one (docs/PERFORMANCE.md, "Keys: a hash map").
  private final Map<KeyTable.KeyId, KeyRecord> byKey = new HashMap<>();
  // The same records, packed at the front of an array (each knows its slot), so that a freeze
  // copies one array instead of walking the hash map: 5-6 ms instead of 90 ms at 820,000 records
  // (KeySnapshotBenchmark, docs/PERFORMANCE.md). Their order is the snapshot's: a new record goes
  // last and the last one moves into a freed slot, so it follows from the commands applied alone.
  private KeyRecord[] packed = new KeyRecord[16];
  // The records again, in the order they expire. It holds the records themselves: an entry of its
  // own, with the key, held a second copy of the key (the one a complete was decoded with) and
  // made every record a third heavier for the collector to copy (docs/PERFORMANCE.md).
  private final TreeSet<KeyRecord> expiry = new TreeSet<>(KeyRecord.BY_EXPIRY);
  // Bumped by freeze(): every record of an older generation may be shared with a frozen copy.
  private long generation;
  private long bytes; // the sum of the records' footprints
  private final Map<String, KeyTable.Usage> usage = new HashMap<>(); // by owner
  private int ownedRecords;

  /** The record of {@code id}, or null. */
  KeyRecord get(KeyTable.KeyId id) {
    return byKey.get(id);
  }

  int size() {
    return byKey.size();
  }

  long bytes() {
    return bytes;
  }

  /** Whether any record has an owner: the snapshot is then of the version with owners. */
  boolean anyOwned() {
    return ownedRecords > 0;
  }

  /** What {@code owner}'s records hold (a live view). */
  KeyTable.Usage usageOf(String owner) {
    KeyTable.Usage u = usage.get(owner);
    return u == null ? NO_USAGE : u;
  }

  /** The records in the table's order, in slots {@code [0, size())} of the returned array. */
  KeyRecord[] inOrder() {
    return packed;
  }

  /** The record in slot {@code i} of the table's order, {@code i < size()}. */
  KeyRecord at(int i) {
    return packed[i];
  }

  /**
   * A copy of the records in the table's order, which the table will not change: each record in it
   * is copied before it next changes ({@link #edit}).
   */
  KeyRecord[] freeze() {
    generation++;
    return Arrays.copyOf(packed, byKey.size());
  }

  /**
   * Adds a new record, not yet in the expiry index: {@link #indexExpiry} once its times are set.
   */
  void insert(KeyRecord r) {
    r.generation = generation;
    add(r);
  }

  /**
   * Takes {@code r} out of the expiry index to change its times, and returns it, or, if a frozen
   * copy may share it (an older generation), a copy of it that replaces it in the table: what a
   * writer thread reads never changes under it. Put it back with {@link #indexExpiry}.
   */
  KeyRecord edit(KeyRecord r) {
    expiry.remove(r);
    if (r.generation == generation) {
      return r;
    }
    KeyRecord c = r.copy();
    c.generation = generation;
    c.slot = r.slot;
    packed[c.slot] = c;
    byKey.put(c.id, c);
    return c;
  }

  /** Puts {@code r} (back) into the expiry index, after its times are set. */
  void indexExpiry(KeyRecord r) {
    expiry.add(r);
  }

  /** Counts {@code n} more bytes (a response stored) in {@code r}'s footprint and its owner's. */
  void charge(KeyRecord r, int n) {
    bytes += n;
    if (r.owner != null) {
      usage.get(r.owner).bytes += n;
    }
  }

  /** Adds a record read from a snapshot, unless its key is in already (then false). */
  boolean restore(KeyRecord r) {
    if (byKey.containsKey(r.id)) {
      return false;
    }
    add(r);
    expiry.add(r);
    return true;
  }

  void remove(KeyRecord r) {
    expiry.remove(r);
    drop(r);
  }

  /** Drops every record whose retention ended before {@code now}; returns how many. */
  int expire(long now) {
    int n = 0;
    while (!expiry.isEmpty() && expiry.first().expiresAt() < now) {
      drop(expiry.pollFirst());
      n++;
    }
    return n;
  }

  /** Adds a new record: to the map, and at the end of the packed array. */
  private void add(KeyRecord r) {
    int n = byKey.size();
    if (n == packed.length) {
      packed = Arrays.copyOf(packed, 2 * n);
    }
    r.slot = n;
    packed[n] = r;
    byKey.put(r.id, r);
    bytes += r.footprint();
    if (r.owner != null) {
      KeyTable.Usage u = usage.computeIfAbsent(r.owner, o -> new KeyTable.Usage());
      u.records++;
      u.bytes += r.footprint();
      ownedRecords++;
    }
  }

  /**
   * Drops a record: from the map, and from the packed array, whose last record moves into its slot.
   * The array shrinks by half once it is a quarter full.
   */
  private void drop(KeyRecord r) {
    byKey.remove(r.id);
    bytes -= r.footprint();
    if (r.owner != null) {
      KeyTable.Usage u = usage.get(r.owner);
      u.records--;
      u.bytes -= r.footprint();
      if (u.records == 0) {
        usage.remove(r.owner);
      }
      ownedRecords--;
    }
    int last = byKey.size();
    KeyRecord moved = packed[last];
    packed[r.slot] = moved;
    moved.slot = r.slot;
    packed[last] = null;
    if (packed.length > 16 && last <= packed.length / 4) {
      packed = Arrays.copyOf(packed, packed.length / 2);
    }
  }
}
