package io.idem.server;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Named leases with a TTL in log time. A lease owns the keys put under it; they are deleted when it
 * expires or is revoked. Ordered collections only, so everything is deterministic. Not thread-safe.
 */
final class LeaseTable {

  /**
   * One lease. Its holder is the session that granted it: only that session renews or revokes it,
   * so a former holder whose lease expired cannot renew (or revoke) the next holder's lease of the
   * same name.
   */
  static final class Lease {
    final String name;
    final long holder;
    final long ttlMs;
    long expiresAtMs;
    final TreeSet<String> keys = new TreeSet<>();

    Lease(String name, long holder, long ttlMs, long expiresAtMs) {
      this.name = name;
      this.holder = holder;
      this.ttlMs = ttlMs;
      this.expiresAtMs = expiresAtMs;
    }
  }

  private record Deadline(long atMs, String name) implements Comparable<Deadline> {
    @Override
    public int compareTo(Deadline o) {
      int c = Long.compare(atMs, o.atMs);
      return c != 0 ? c : name.compareTo(o.name);
    }
  }

  private final TreeMap<String, Lease> leases = new TreeMap<>();
  private final TreeSet<Deadline> deadlines = new TreeSet<>();

  Lease get(String name) {
    return leases.get(name);
  }

  int size() {
    return leases.size();
  }

  Collection<Lease> all() {
    return leases.values();
  }

  /** Creates a lease held by session {@code holder}; the caller has checked the name is free. */
  Lease grant(String name, long holder, long ttlMs, long now) {
    Lease l = new Lease(name, holder, ttlMs, now + ttlMs);
    leases.put(name, l);
    deadlines.add(new Deadline(l.expiresAtMs, name));
    return l;
  }

  /** Pushes the lease's expiry to {@code atMs} if that is later. */
  void extend(Lease l, long atMs) {
    if (atMs > l.expiresAtMs) {
      deadlines.remove(new Deadline(l.expiresAtMs, l.name));
      l.expiresAtMs = atMs;
      deadlines.add(new Deadline(l.expiresAtMs, l.name));
    }
  }

  /**
   * After a leader change, gives every lease a grace period of its TTL from {@code now}, as etcd
   * does: the old leader's keep-alives may have been lost in the failover.
   */
  void grace(long now) {
    for (Lease l : List.copyOf(leases.values())) {
      extend(l, now + l.ttlMs);
    }
  }

  /** Removes a lease and returns the keys it owned, which the caller deletes. */
  Collection<String> revoke(Lease l) {
    leases.remove(l.name);
    deadlines.remove(new Deadline(l.expiresAtMs, l.name));
    return l.keys;
  }

  /** Removes the leases whose expiry is before {@code now}; returns them in expiry order. */
  List<Lease> expire(long now) {
    List<Lease> gone = new ArrayList<>();
    while (!deadlines.isEmpty() && deadlines.first().atMs() < now) {
      Lease l = leases.get(deadlines.pollFirst().name());
      leases.remove(l.name);
      gone.add(l);
    }
    return gone;
  }

  /** Restores a lease from a snapshot; its keys are attached as the KV entries are read. */
  Lease restore(String name, long holder, long ttlMs, long expiresAtMs) {
    Lease l = new Lease(name, holder, ttlMs, expiresAtMs);
    leases.put(name, l);
    deadlines.add(new Deadline(expiresAtMs, name));
    return l;
  }
}
