package io.idem.server;

import com.google.protobuf.ByteString;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The replicated key-value map. Keys are ordered by {@link String#compareTo}, so iteration (for
 * snapshots and digests) is deterministic. A key holds either a value or, once written by {@code
 * append}, a list of elements. Not thread-safe: the state machine serialises access.
 */
final class KvStore {

  /** One key's state. Mutable; owned by the store. */
  static final class Entry {
    ByteString value;
    List<ByteString> elements;
    long version;
    long createRevision;
    long modRevision;
    String lease;

    boolean isList() {
      return elements != null;
    }
  }

  private final TreeMap<String, Entry> entries = new TreeMap<>();

  Entry get(String key) {
    return entries.get(key);
  }

  int size() {
    return entries.size();
  }

  Iterable<Map.Entry<String, Entry>> all() {
    return entries.entrySet();
  }

  /** Writes a plain value; returns the entry. The caller has checked that the key is not a list. */
  Entry put(String key, ByteString value, long revision) {
    Entry e = entries.get(key);
    if (e == null) {
      e = new Entry();
      e.createRevision = revision;
      entries.put(key, e);
    }
    e.value = value;
    e.elements = null;
    e.version++;
    e.modRevision = revision;
    return e;
  }

  /** Appends to the list at {@code key}; the caller has checked it is not a plain value. */
  Entry append(String key, ByteString element, long revision) {
    Entry e = entries.get(key);
    if (e == null) {
      e = new Entry();
      e.createRevision = revision;
      e.elements = new ArrayList<>();
      entries.put(key, e);
    }
    e.elements.add(element);
    e.version++;
    e.modRevision = revision;
    return e;
  }

  /** Removes {@code key}; returns the removed entry or {@code null}. */
  Entry remove(String key) {
    return entries.remove(key);
  }

  /** Restores an entry from a snapshot. */
  void restore(String key, Entry e) {
    entries.put(key, e);
  }
}
