package io.idem.core;

import java.util.Arrays;

/**
 * Sessions by client id: an open-addressing hash table with linear probing over a single {@code
 * Session[]} (the key is read from the session itself), and backward-shift deletion, so there are
 * no tombstones and no boxed keys. This is the admission hot path and most of the per-session heap
 * cost, which is why it is not a {@code HashMap<Long, Session>} (see docs/PERFORMANCE.md).
 *
 * <p>Its iteration order depends on capacity and history, so nothing that leaks into replicated
 * state may iterate it; {@link #sortedIds()} is the deterministic view.
 */
final class SessionIndex {
  private static final int MIN_CAPACITY = 16;

  private Session[] slots = new Session[MIN_CAPACITY];
  private int size;

  int size() {
    return size;
  }

  /** Grows the table once so that {@code expected} sessions fit without further resizing. */
  void ensureCapacity(int expected) {
    long needed = Math.max(MIN_CAPACITY, Long.highestOneBit(Math.max(1, expected * 2L - 1)) << 1);
    if (needed > slots.length && needed <= 1 << 30) {
      resize((int) needed);
    }
  }

  Session get(long clientId) {
    Session[] t = slots;
    int mask = t.length - 1;
    for (int i = slot(clientId, mask); ; i = (i + 1) & mask) {
      Session s = t[i];
      if (s == null || s.clientId == clientId) {
        return s;
      }
    }
  }

  /** Adds {@code session}; its id must not be present. */
  void add(Session session) {
    if ((size + 1) * 2 > slots.length) {
      resize(slots.length * 2);
    }
    insert(slots, session);
    size++;
  }

  /** Removes the session with this id, if present. */
  void remove(long clientId) {
    Session[] t = slots;
    int mask = t.length - 1;
    int i = slot(clientId, mask);
    while (true) {
      Session s = t[i];
      if (s == null) {
        return;
      }
      if (s.clientId == clientId) {
        break;
      }
      i = (i + 1) & mask;
    }
    // Backward-shift: pull later members of the probe run into the hole so lookups never stop
    // early.
    int hole = i;
    for (int j = (hole + 1) & mask; t[j] != null; j = (j + 1) & mask) {
      int home = slot(t[j].clientId, mask);
      boolean movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
      if (movable) {
        t[hole] = t[j];
        hole = j;
      }
    }
    t[hole] = null;
    size--;
  }

  /** All ids in ascending order: the deterministic iteration for snapshots and digests. */
  /** Every session, in no particular order. */
  Session[] all() {
    Session[] all = new Session[size];
    int n = 0;
    for (Session s : slots) {
      if (s != null) {
        all[n++] = s;
      }
    }
    return all;
  }

  long[] sortedIds() {
    long[] ids = new long[size];
    int n = 0;
    for (Session s : slots) {
      if (s != null) {
        ids[n++] = s.clientId;
      }
    }
    Arrays.sort(ids);
    return ids;
  }

  private void resize(int capacity) {
    Session[] bigger = new Session[capacity];
    for (Session s : slots) {
      if (s != null) {
        insert(bigger, s);
      }
    }
    slots = bigger;
  }

  private static void insert(Session[] t, Session session) {
    int mask = t.length - 1;
    int i = slot(session.clientId, mask);
    while (t[i] != null) {
      i = (i + 1) & mask;
    }
    t[i] = session;
  }

  private static int slot(long key, int mask) {
    long h = key * 0x9E3779B97F4A7C15L;
    return (int) (h ^ (h >>> 32)) & mask;
  }
}
