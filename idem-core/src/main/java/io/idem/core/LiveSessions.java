package io.idem.core;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongConsumer;

/**
 * The sessions of a {@link SessionTable}, indexed four ways (by id, by expiry, by name, and by id
 * again for other threads), and what they hold: saved responses and their bytes, in all and by
 * principal. The table decides; this keeps the indexes and the counts in step. Not thread-safe, but
 * for {@link #credential}.
 */
final class LiveSessions {

  private static final SessionTable.Usage NONE = new SessionTable.Usage();

  private final SessionIndex byId = new SessionIndex();
  private final ExpiryHeap expiry = new ExpiryHeap();

  /**
   * Named sessions: by name, then by principal ("" for none). Ordered by principal, so that the one
   * namespace of {@link SessionTable.NameScope#GLOBAL} decides by a fixed session should several
   * principals hold one name.
   */
  private final Map<String, TreeMap<String, Session>> byName = new HashMap<>();

  /**
   * Every session by id, readable from any thread: {@link SessionTable#authenticate} reads it
   * without the caller's lock (a session's secret and principal never change, so the entry is all
   * it needs).
   */
  private final ConcurrentHashMap<Long, Session> credentials = new ConcurrentHashMap<>();

  private long savedResponses;

  /** What each principal's live sessions hold, by principal ("" for sessions without one). */
  private final Map<String, SessionTable.Usage> usage = new HashMap<>();

  /** The bytes of every saved response. */
  private long savedBytes;

  Session get(long clientId) {
    return byId.get(clientId);
  }

  /** The session of that id; safe from any thread. */
  Session credential(long clientId) {
    return credentials.get(clientId);
  }

  int size() {
    return byId.size();
  }

  long[] sortedIds() {
    return byId.sortedIds();
  }

  /** Every session, in no particular order. */
  Session[] all() {
    return byId.all();
  }

  long savedResponses() {
    return savedResponses;
  }

  long savedBytes() {
    return savedBytes;
  }

  /** Counts responses saved ({@code > 0}) or dropped ({@code < 0}), and their bytes. */
  void count(long responses, long bytes) {
    savedResponses += responses;
    savedBytes += bytes;
  }

  /** What {@code principal}'s live sessions hold (null or empty: sessions without one). */
  SessionTable.Usage usageOf(String principal) {
    SessionTable.Usage u = usage.get(principal == null ? "" : principal);
    return u == null ? NONE : u;
  }

  /** Whether a live session holds {@code name}. */
  boolean holdsName(String name) {
    return byName.containsKey(name);
  }

  /** The session named {@code name} that {@code owner} (null: none) finds in {@code scope}. */
  Session named(String name, String owner, SessionTable.NameScope scope) {
    TreeMap<String, Session> holders = byName.get(name);
    if (holders == null) {
      return null;
    }
    return scope == SessionTable.NameScope.GLOBAL
        ? holders.firstEntry().getValue()
        : holders.get(owner == null ? "" : owner);
  }

  /** Sizes the indexes for {@code expected} sessions, before a bulk load. */
  void ensureCapacity(int expected) {
    byId.ensureCapacity(expected);
    expiry.ensureCapacity(expected);
  }

  /** Adds a restored or new session; its id and name must be free. */
  void add(Session s) {
    byId.add(s);
    credentials.put(s.clientId, s);
    expiry.add(s);
    if (s.name != null) {
      byName
          .computeIfAbsent(s.name, n -> new TreeMap<>())
          .put(s.principal == null ? "" : s.principal, s);
    }
    savedResponses += s.savedResponses();
    savedBytes += s.savedBytes();
    SessionTable.Usage u =
        usage.computeIfAbsent(
            s.principal == null ? "" : s.principal, p -> new SessionTable.Usage());
    u.sessions++;
    u.savedBytes += s.savedBytes();
    s.usage = u;
  }

  void remove(Session s) {
    byId.remove(s.clientId);
    credentials.remove(s.clientId);
    expiry.remove(s);
    if (s.name != null) {
      TreeMap<String, Session> holders = byName.get(s.name);
      holders.remove(s.principal == null ? "" : s.principal);
      if (holders.isEmpty()) {
        byName.remove(s.name);
      }
    }
    savedResponses -= s.savedResponses();
    savedBytes -= s.savedBytes();
    SessionTable.Usage u = s.usage;
    u.sessions--;
    u.savedBytes -= s.savedBytes();
    if (u.sessions == 0) {
      usage.remove(s.principal == null ? "" : s.principal);
    }
    s.usage = null;
  }

  /**
   * Removes every session whose TTL has passed at {@code now} and reports their ids to {@code
   * expired} in ascending order; returns how many.
   */
  int expire(long now, LongConsumer expired) {
    long[] ids = null;
    int count = 0;
    for (Session s = expiry.peek(); s != null && s.heapDeadlineMs < now; s = expiry.peek()) {
      long deadline = s.expiresAfterMs();
      if (deadline >= now) {
        expiry.increaseKey(s, deadline);
        continue;
      }
      if (ids == null) {
        ids = new long[8];
      } else if (count == ids.length) {
        ids = Arrays.copyOf(ids, count * 2);
      }
      ids[count++] = s.clientId;
      remove(s);
    }
    if (count > 0) {
      // The heap's lazily kept keys differ between a replica restored from a snapshot and one that
      // was not; sorting makes the reported order depend on the state alone.
      Arrays.sort(ids, 0, count);
      for (int i = 0; i < count; i++) {
        expired.accept(ids[i]);
      }
    }
    return count;
  }

  /** A copy of {@code s}'s state. */
  static SessionInfo info(Session s) {
    return new SessionInfo(
        s.clientId,
        s.epoch,
        s.name,
        s.ttlMs,
        s.lastActiveMs,
        s.nextSeq,
        s.lowWater,
        s.savedResponses());
  }

  /** The {@code n >= 0} sessions that save the most responses, most first (ties by id). */
  List<SessionInfo> largest(int n) {
    Comparator<SessionInfo> order =
        Comparator.comparingInt(SessionInfo::savedResponses)
            .reversed()
            .thenComparingLong(SessionInfo::clientId);
    PriorityQueue<SessionInfo> kept = new PriorityQueue<>(order.reversed());
    for (long id : byId.sortedIds()) {
      kept.add(info(byId.get(id)));
      if (kept.size() > n) {
        kept.poll();
      }
    }
    List<SessionInfo> largest = new ArrayList<>(kept);
    largest.sort(order);
    return largest;
  }
}
