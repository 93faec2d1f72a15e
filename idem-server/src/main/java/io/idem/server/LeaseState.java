package io.idem.server;

import io.idem.proto.Code;
import io.idem.proto.GrantLease;
import io.idem.proto.Result;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The leases domain: named leases with a TTL in log time, each held by the session that was granted
 * it, and the lease operations' answers. The keys put under a lease are the KV domain's ({@link
 * KvState#deleteLeased}); they end with it. Ordered collections only, so everything is
 * deterministic. Not thread-safe.
 *
 * <p>Snapshot section: {@code int count}, then per lease in name order: {@code utf name, long
 * holder, long ttlMs, long expiresAtMs}. Version 1 snapshots have no holder: such leases are
 * restored with holder 0 (session ids start at 4096), which any session may renew or revoke. A
 * lease with an owner (below) is written with {@code -(holder + 1)} in place of its holder and
 * {@code utf owner} after the name; one without is written as before owners existed.
 *
 * <p>Quotas (log format 7 and later): a lease is charged to the principal of the session granted it
 * (its owner) for as long as it lives; a grant past the principal's {@code leases} quota is refused
 * with {@code QUOTA_EXCEEDED}, and any grant while the backend is full with {@code NO_SPACE}.
 * Leases granted by older formats have no owner.
 */
final class LeaseState implements StateSection {

  /** How leases behave under an entry's log format version (which {@link ReplicatedState} maps). */
  enum Rules {
    /** Version 1: any session renews or revokes any lease; a revoke answers no log time. */
    OWNERLESS,
    /**
     * Since version 2: only the holder renews or revokes, so that a former holder whose lease
     * expired cannot renew (or revoke) the next holder's lease of the same name; a revoke answers
     * the log time at which the lease ended.
     */
    HELD
  }

  /** The bytes a lease costs beyond its name, in the state's size estimate. */
  static final long LEASE_OVERHEAD = 128;

  private static final class Lease {
    final String name;
    final long holder;
    final long ttlMs;
    final String owner; // the principal charged for it (log format 7), or null
    long expiresAtMs;

    Lease(String name, long holder, long ttlMs, long expiresAtMs, String owner) {
      this.name = name;
      this.holder = holder;
      this.ttlMs = ttlMs;
      this.expiresAtMs = expiresAtMs;
      this.owner = owner;
    }
  }

  private record Deadline(long atMs, String name) implements Comparable<Deadline> {
    @Override
    public int compareTo(Deadline o) {
      int c = Long.compare(atMs, o.atMs);
      return c != 0 ? c : name.compareTo(o.name);
    }
  }

  private final ConfigState config;
  private final TreeMap<String, Lease> leases = new TreeMap<>();
  private final TreeSet<Deadline> deadlines = new TreeSet<>();

  /** Leases per owner. Only looked up, never iterated. */
  private final HashMap<String, Long> owned = new HashMap<>();

  /** The sum of the leases' names' bytes, for the size estimate. */
  private long nameBytes;

  /**
   * @param config the replicated limits (lease names and TTLs)
   */
  LeaseState(ConfigState config) {
    this.config = config;
  }

  boolean exists(String name) {
    return leases.containsKey(name);
  }

  int size() {
    return leases.size();
  }

  /** The leases' share of the state's size estimate. */
  long bytes() {
    return leases.size() * LEASE_OVERHEAD + nameBytes;
  }

  /** The leases {@code principal} owns. */
  long countOf(String principal) {
    return owned.getOrDefault(principal, 0L);
  }

  /** The session holding lease {@code name} (0: restored from version 1), if it exists. */
  OptionalLong holder(String name) {
    Lease l = leases.get(name);
    return l == null ? OptionalLong.empty() : OptionalLong.of(l.holder);
  }

  /** {@link #grant(long, long, GrantLease, long, Payer)} without a payer (formats before 7). */
  Result grant(long revision, long session, GrantLease g, long now) {
    return grant(revision, session, g, now, null);
  }

  /**
   * Grants lease {@code g} to {@code session}, charged to {@code payer} (null: nobody); the
   * answer's number is its expiry in log time.
   */
  Result grant(long revision, long session, GrantLease g, long now, Payer payer) {
    Limits limits = config.limits();
    String name = g.getName();
    long ttlMs = g.getTtlMs();
    String bad = limits.checkName(name);
    if (bad == null && (ttlMs < 1 || ttlMs > limits.maxLeaseTtlMs())) {
      bad = "lease TTL must be in [1, " + limits.maxLeaseTtlMs() + "] ms, got " + ttlMs;
    }
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    if (leases.containsKey(name)) {
      return Results.of(revision, Code.DUPLICATE_LEASE, "lease \"" + name + "\" is held");
    }
    if (payer != null) {
      if (payer.full()) {
        return payer.noSpace(revision);
      }
      long held = countOf(payer.principal());
      if (held >= payer.quotas().leases()) {
        return payer.overQuota(revision, "leases", held + " leases", payer.quotas().leases());
      }
    }
    Lease l = add(name, session, ttlMs, now + ttlMs, payer == null ? null : payer.principal());
    return Results.ok(revision).setNumber(l.expiresAtMs).setDone(true).build();
  }

  /** Renews the lease; the answer's number is its new expiry in log time. */
  Result keepAlive(long revision, long session, String name, long now, Rules rules) {
    Lease l = heldBy(session, name, rules);
    if (l == null) {
      return notHeld(revision, name);
    }
    extend(l, now + l.ttlMs);
    return Results.ok(revision).setNumber(l.expiresAtMs).setDone(true).build();
  }

  /**
   * Revokes the lease (the caller deletes its keys when the answer is done); under {@link
   * Rules#HELD} the answer's number is the log time at which it ended.
   */
  Result revoke(long revision, long session, String name, long now, Rules rules) {
    Lease l = heldBy(session, name, rules);
    if (l == null) {
      return notHeld(revision, name);
    }
    drop(leases.remove(l.name));
    deadlines.remove(new Deadline(l.expiresAtMs, l.name));
    Result.Builder r = Results.ok(revision).setDone(true);
    return (rules == Rules.HELD ? r.setNumber(now) : r).build();
  }

  /**
   * After a leader change, gives every lease a grace period of its TTL from {@code now}, as etcd
   * does: the old leader's keep-alives may have been lost in the failover.
   */
  void afterLeaderChange(long now) {
    for (Lease l : List.copyOf(leases.values())) {
      extend(l, now + l.ttlMs);
    }
  }

  /** Removes the leases whose expiry is before {@code now}; returns their names in expiry order. */
  List<String> expire(long now) {
    List<String> gone = new ArrayList<>();
    while (!deadlines.isEmpty() && deadlines.first().atMs() < now) {
      String name = deadlines.pollFirst().name();
      drop(leases.remove(name));
      gone.add(name);
    }
    return gone;
  }

  /** The lease {@code name} if {@code session} may renew or revoke it under {@code rules}. */
  private Lease heldBy(long session, String name, Rules rules) {
    Lease l = leases.get(name);
    boolean mine = l != null && (l.holder == session || l.holder == 0 || rules == Rules.OWNERLESS);
    return mine ? l : null;
  }

  private Result notHeld(long revision, String name) {
    return Results.of(
        revision,
        Code.LEASE_NOT_FOUND,
        leases.containsKey(name)
            ? "lease \"" + name + "\" is held by another session"
            : "no lease named \"" + name + "\"");
  }

  private Lease add(String name, long holder, long ttlMs, long expiresAtMs, String owner) {
    Lease l = new Lease(name, holder, ttlMs, expiresAtMs, owner);
    leases.put(name, l);
    deadlines.add(new Deadline(expiresAtMs, name));
    nameBytes += 2L * name.length();
    if (owner != null) {
      owned.merge(owner, 1L, Long::sum);
    }
    return l;
  }

  /** Takes a removed lease out of the accounting. */
  private void drop(Lease l) {
    nameBytes -= 2L * l.name.length();
    if (l.owner != null && owned.merge(l.owner, -1L, Long::sum) == 0) {
      owned.remove(l.owner);
    }
  }

  /** Pushes the lease's expiry to {@code atMs} if that is later. */
  private void extend(Lease l, long atMs) {
    if (atMs > l.expiresAtMs) {
      deadlines.remove(new Deadline(l.expiresAtMs, l.name));
      l.expiresAtMs = atMs;
      deadlines.add(new Deadline(l.expiresAtMs, l.name));
    }
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    out.writeInt(leases.size());
    for (Lease l : leases.values()) {
      StateSection.writeString(out, l.name);
      if (l.owner == null) {
        out.writeLong(l.holder);
      } else {
        out.writeLong(-(l.holder + 1));
        StateSection.writeString(out, l.owner);
      }
      out.writeLong(l.ttlMs);
      out.writeLong(l.expiresAtMs);
    }
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    int n = StateSection.count(in.readInt(), "lease");
    for (int i = 0; i < n; i++) {
      String name = StateSection.readString(in);
      long holder = formatVersion == 1 ? 0 : in.readLong();
      String owner = null;
      if (holder < 0) {
        holder = -holder - 1;
        owner = StateSection.readString(in);
      }
      add(name, holder, in.readLong(), in.readLong(), owner);
    }
  }
}
