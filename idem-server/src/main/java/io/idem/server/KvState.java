package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.core.SnapshotFormatException;
import io.idem.proto.Append;
import io.idem.proto.Code;
import io.idem.proto.CompareAndSet;
import io.idem.proto.GetReply;
import io.idem.proto.Increment;
import io.idem.proto.Put;
import io.idem.proto.Result;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.TreeSet;

/**
 * The key-value domain: the replicated map, its operations and their answers, and which keys live
 * under which lease. A key holds either a value or, once written by {@code append}, a list of
 * elements. Keys are ordered by {@link String#compareTo}, so iteration (for snapshots and digests)
 * is deterministic. Not thread-safe.
 *
 * <p>Entries live in a hash map by key, for lookups, and in a packed array, for snapshots. An
 * ordered map cost a third of a follower's CPU at 256,000 keys (tree descents comparing keys with a
 * common prefix); the snapshot sorts its copy by key instead, when it is written. {@link #freeze}
 * copies the array, not the entries: an entry made before a freeze is shared with the frozen
 * snapshot, and is copied ({@link #mutable}) before it next changes. Walking and copying every
 * entry under the lock instead stalled the apply thread of every replica, at the same index, for up
 * to 290 ms at 256,000 keys (docs/PERFORMANCE.md).
 *
 * <p>Quotas (log format 7 and later): each key is charged to the principal that wrote it last, its
 * owner, for one key and its {@link #footprint} (a write by another principal moves it over); keys
 * written by older formats have no owner. A write that would take its principal past {@code
 * kv_keys} or {@code kv_bytes}, or an {@code append} past {@code list_length}, is refused with
 * {@code QUOTA_EXCEEDED}, and a write that grows the state while the backend is full with {@code
 * NO_SPACE}; deletes always go through. The usage is derived from the keys, never in the snapshot.
 *
 * <p>Snapshot section: {@code int count}, then per key in key order: {@code utf key, byte kind (0
 * value, 1 list; plus 0x80 if it has an owner), long version, long createRevision, long
 * modRevision, utf lease ("" for none)}, the owner ({@code utf}, only with 0x80), and the value
 * ({@code int length} + bytes) or the list ({@code int count}, then length + bytes each). A key
 * without an owner is written as before owners existed. It follows the leases' section, whose
 * leases its keys name.
 */
final class KvState implements StateSection {

  /** The bytes a key costs beyond its key and value, in the state's size estimate. */
  static final long ENTRY_OVERHEAD = 128;

  /** The bytes a list element costs beyond its value. */
  static final long ELEMENT_OVERHEAD = 16;

  /** The kind bit of a snapshot entry that carries an owner. */
  private static final int OWNED = 0x80;

  /** What one principal's keys hold. Derived; never in the snapshot. */
  private static final class Usage {
    long keys;
    long bytes;
  }

  private static final Usage NO_USAGE = new Usage();

  /**
   * One key's state. Once a {@link #freeze} ran after it was made, a frozen snapshot may hold it:
   * then it never changes again, and {@link #mutable} gives a copy to change instead.
   */
  private static final class Entry {
    final String key;

    /** The {@link KvState#generation} it was made in. */
    final long generation;

    /** Its place in {@link KvState#slots}; never written, so it may change in a frozen entry. */
    int slot;

    ByteString value;
    List<ByteString> elements;
    long version;
    long createRevision;
    long modRevision;
    String lease;

    /** The principal charged for it (log format 7 and later), or null. */
    String owner;

    /** Its {@link #footprint}, as charged. */
    long bytes;

    boolean isList() {
      return elements != null;
    }

    Entry(String key, long generation) {
      this.key = key;
      this.generation = generation;
    }

    /**
     * A copy to change, made in {@code generation}; a list is copied, its values (immutable)
     * shared.
     */
    Entry copy(long generation) {
      Entry c = new Entry(key, generation);
      c.slot = slot;
      c.value = value;
      c.elements = elements == null ? null : new ArrayList<>(elements);
      c.version = version;
      c.createRevision = createRevision;
      c.modRevision = modRevision;
      c.lease = lease;
      c.owner = owner;
      c.bytes = bytes;
      return c;
    }
  }

  private final ConfigState config;
  private final LeaseState leases;
  private final HashMap<String, Entry> index = new HashMap<>();

  /** Every entry, packed in no particular order: {@code slots[0..count)}. */
  private Entry[] slots = new Entry[64];

  private int count;

  /** How many times {@link #freeze} ran: an entry of an earlier generation may be frozen. */
  private long generation;

  /** The keys under each lease, by lease name. Only looked up, never iterated. */
  private final HashMap<String, TreeSet<String>> leased = new HashMap<>();

  /** The owners' usage, by principal. Only looked up, never iterated. */
  private final HashMap<String, Usage> usage = new HashMap<>();

  /** The sum of every key's footprint. */
  private long bytes;

  /**
   * @param config the replicated limits (keys and values)
   * @param leases the leases a put may name
   */
  KvState(ConfigState config, LeaseState leases) {
    this.config = config;
    this.leases = leases;
  }

  int size() {
    return count;
  }

  /** The sum of every key's footprint: its share of the state's size estimate. */
  long bytes() {
    return bytes;
  }

  /** The keys {@code principal} owns. */
  long keysOf(String principal) {
    Usage u = usage.get(principal);
    return u == null ? 0 : u.keys;
  }

  /** The bytes of the keys {@code principal} owns. */
  long bytesOf(String principal) {
    Usage u = usage.get(principal);
    return u == null ? 0 : u.bytes;
  }

  /** What a key with a plain value costs in the size estimate. */
  static long footprint(String key, ByteString value) {
    return ENTRY_OVERHEAD + 2L * key.length() + value.size();
  }

  /** {@link #put(long, Put, Payer)} by nobody (log formats before 7: no owner, no quota). */
  Result put(long revision, Put p) {
    return put(revision, p, null);
  }

  /** Writes a plain value, under a lease if it names one (else under none). */
  Result put(long revision, Put p, Payer payer) {
    Limits limits = config.limits();
    String bad = firstProblem(limits.checkKey(p.getKey()), limits.checkValue(p.getValue().size()));
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Entry existing = index.get(p.getKey());
    if (existing != null && existing.isList()) {
      return wrongType(revision, p.getKey(), "a list (written by append)");
    }
    String lease = p.getLease().isEmpty() ? null : p.getLease();
    if (lease != null && !leases.exists(lease)) {
      return Results.of(revision, Code.LEASE_NOT_FOUND, "no lease named \"" + lease + "\"");
    }
    Result refused =
        refusal(revision, p.getKey(), existing, footprint(p.getKey(), p.getValue()), payer);
    if (refused != null) {
      return refused;
    }
    Entry e = write(p.getKey(), p.getValue(), revision, payer);
    attach(p.getKey(), e, lease);
    return Results.ok(revision).setVersion(e.version).setDone(true).build();
  }

  Result delete(long revision, String key) {
    String bad = config.limits().checkKey(key);
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Entry e = remove(key);
    if (e != null) {
      detach(key, e);
    }
    return Results.ok(revision).setDone(e != null).build();
  }

  Result compareAndSet(long revision, CompareAndSet c) {
    return compareAndSet(revision, c, null);
  }

  Result compareAndSet(long revision, CompareAndSet c, Payer payer) {
    Limits limits = config.limits();
    String bad = firstProblem(limits.checkKey(c.getKey()), limits.checkValue(c.getValue().size()));
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Entry e = index.get(c.getKey());
    if (e != null && e.isList()) {
      return wrongType(revision, c.getKey(), "a list (written by append)");
    }
    long current = e == null ? 0 : e.version;
    if (current != c.getExpectedVersion()) {
      return Result.newBuilder()
          .setCode(Code.CAS_MISMATCH)
          .setMessage("version is " + current + ", expected " + c.getExpectedVersion())
          .setRevision(revision)
          .setVersion(current)
          .build();
    }
    Result refused = refusal(revision, c.getKey(), e, footprint(c.getKey(), c.getValue()), payer);
    if (refused != null) {
      return refused;
    }
    Entry written = write(c.getKey(), c.getValue(), revision, payer);
    return Results.ok(revision).setVersion(written.version).setDone(true).build();
  }

  Result increment(long revision, Increment inc) {
    return increment(revision, inc, null);
  }

  Result increment(long revision, Increment inc, Payer payer) {
    String bad = config.limits().checkKey(inc.getKey());
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Entry e = index.get(inc.getKey());
    long current = 0;
    if (e != null) {
      if (e.isList()) {
        return wrongType(revision, inc.getKey(), "a list (written by append)");
      }
      try {
        current = Long.parseLong(e.value.toStringUtf8());
      } catch (NumberFormatException notANumber) {
        return wrongType(revision, inc.getKey(), "not a decimal number");
      }
    }
    long next;
    try {
      next = Math.addExact(current, inc.getDelta());
    } catch (ArithmeticException overflow) {
      return Results.invalid(revision, "counter " + inc.getKey() + " would overflow");
    }
    ByteString value = ByteString.copyFromUtf8(Long.toString(next));
    Result refused = refusal(revision, inc.getKey(), e, footprint(inc.getKey(), value), payer);
    if (refused != null) {
      return refused;
    }
    Entry written = write(inc.getKey(), value, revision, payer);
    return Results.ok(revision).setVersion(written.version).setNumber(next).setDone(true).build();
  }

  Result append(long revision, Append a) {
    return append(revision, a, null);
  }

  Result append(long revision, Append a, Payer payer) {
    Limits limits = config.limits();
    String bad = firstProblem(limits.checkKey(a.getKey()), limits.checkValue(a.getValue().size()));
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Entry e = index.get(a.getKey());
    if (e != null && !e.isList()) {
      return wrongType(revision, a.getKey(), "a plain value (written by put)");
    }
    if (payer != null) {
      long length = e == null ? 0 : e.elements.size();
      if (length >= payer.quotas().listLength()) {
        return payer.overQuota(
            revision,
            "list_length",
            "list \"" + a.getKey() + "\" of " + length + " elements",
            payer.quotas().listLength());
      }
      long grown =
          (e == null ? ENTRY_OVERHEAD + 2L * a.getKey().length() : e.bytes)
              + ELEMENT_OVERHEAD
              + a.getValue().size();
      Result refused = refusal(revision, a.getKey(), e, grown, payer);
      if (refused != null) {
        return refused;
      }
    }
    if (e == null) {
      e = new Entry(a.getKey(), generation);
      e.createRevision = revision;
      e.elements = new ArrayList<>();
      e.bytes = ENTRY_OVERHEAD + 2L * a.getKey().length();
      add(e);
      account(e, 1); // ownerless for now: the next lines move it to its owner
    } else {
      e = mutable(e);
    }
    account(e, -1);
    e.elements.add(a.getValue());
    e.bytes += ELEMENT_OVERHEAD + a.getValue().size();
    e.owner = payer == null ? null : payer.principal();
    account(e, 1);
    e.version++;
    e.modRevision = revision;
    return Results.ok(revision)
        .setVersion(e.version)
        .setNumber(e.elements.size())
        .setDone(true)
        .build();
  }

  /** Deletes the keys put under lease {@code name}, which ended (revoked or expired). */
  void deleteLeased(String name) {
    TreeSet<String> keys = leased.remove(name);
    if (keys != null) {
      for (String key : keys) {
        remove(key);
      }
    }
  }

  /** A linearizable read's answer, given that the read index has been applied. */
  GetReply get(String key) {
    String bad = config.limits().checkKey(key);
    if (bad != null) {
      return GetReply.newBuilder().setCode(Code.INVALID_ARGUMENT).setMessage(bad).build();
    }
    Entry e = index.get(key);
    if (e == null) {
      return GetReply.newBuilder().setCode(Code.OK).setFound(false).build();
    }
    GetReply.Builder b =
        GetReply.newBuilder()
            .setCode(Code.OK)
            .setFound(true)
            .setVersion(e.version)
            .setModRevision(e.modRevision);
    if (e.isList()) {
      b.addAllElements(e.elements);
    } else {
      b.setValue(e.value);
    }
    if (e.lease != null) {
      b.setLease(e.lease);
    }
    return b.build();
  }

  /**
   * The refusal of a write that makes {@code key} (now {@code e}, null if absent) cost {@code
   * newBytes}, or null if {@code payer} may make it: {@code NO_SPACE} if it grows the state while
   * the backend is full, {@code QUOTA_EXCEEDED} if it takes the payer past {@code kv_keys} or
   * {@code kv_bytes}. A write that grows nothing of the payer's always goes through.
   */
  private Result refusal(long revision, String key, Entry e, long newBytes, Payer payer) {
    if (payer == null) {
      return null;
    }
    long oldBytes = e == null ? 0 : e.bytes;
    if (newBytes > oldBytes && payer.full()) {
      return payer.noSpace(revision);
    }
    Usage u = usage.getOrDefault(payer.principal(), NO_USAGE);
    boolean mine = e != null && payer.principal().equals(e.owner);
    if (!mine && u.keys >= payer.quotas().kvKeys()) {
      return payer.overQuota(
          revision,
          "kv_keys",
          u.keys + " keys; key \"" + key + "\" would be one more",
          payer.quotas().kvKeys());
    }
    long after = u.bytes + newBytes - (mine ? oldBytes : 0);
    if (after > u.bytes && after > payer.quotas().kvBytes()) {
      return payer.overQuota(
          revision,
          "kv_bytes",
          u.bytes + " bytes of keys and values; this write would make " + after,
          payer.quotas().kvBytes());
    }
    return null;
  }

  /** Writes a plain value, keeping the key's lease; the caller checked it is not a list. */
  private Entry write(String key, ByteString value, long revision, Payer payer) {
    Entry e = index.get(key);
    if (e == null) {
      e = new Entry(key, generation);
      e.createRevision = revision;
      add(e);
    } else {
      e = mutable(e);
    }
    account(e, -1);
    e.value = value;
    e.elements = null;
    e.bytes = footprint(key, value);
    e.owner = payer == null ? null : payer.principal();
    account(e, 1);
    e.version++;
    e.modRevision = revision;
    return e;
  }

  /** Adds ({@code sign} 1) or takes away (-1) an entry's bytes, from the total and its owner. */
  private void account(Entry e, int sign) {
    bytes += sign * e.bytes;
    if (e.owner != null) {
      Usage u = usage.computeIfAbsent(e.owner, o -> new Usage());
      u.keys += sign;
      u.bytes += sign * e.bytes;
      if (u.keys == 0) {
        usage.remove(e.owner);
      }
    }
  }

  /**
   * Moves {@code key} from its current lease (if any) to {@code lease} (may be null); {@code e}
   * must be of this generation ({@link #mutable}).
   */
  private void attach(String key, Entry e, String lease) {
    detach(key, e);
    e.lease = lease;
    if (lease != null) {
      leased.computeIfAbsent(lease, l -> new TreeSet<>()).add(key);
    }
  }

  /** Takes {@code key} off its lease's keys, if it has a lease; {@code e} itself is not changed. */
  private void detach(String key, Entry e) {
    if (e.lease != null) {
      TreeSet<String> old = leased.get(e.lease);
      if (old != null) {
        old.remove(key);
      }
    }
  }

  /**
   * {@code e} if it was made in this generation; else a copy of it that takes its place, so that
   * the frozen snapshots holding {@code e} keep it as it was.
   */
  private Entry mutable(Entry e) {
    if (e.generation == generation) {
      return e;
    }
    Entry c = e.copy(generation);
    index.put(c.key, c);
    slots[c.slot] = c;
    return c;
  }

  private void add(Entry e) {
    index.put(e.key, e);
    if (count == slots.length) {
      slots = Arrays.copyOf(slots, count * 2);
    }
    e.slot = count;
    slots[count++] = e;
  }

  /** Removes {@code key}; the last slot's entry moves into its slot. */
  private Entry remove(String key) {
    Entry e = index.remove(key);
    if (e != null) {
      Entry last = slots[--count];
      slots[e.slot] = last;
      last.slot = e.slot;
      slots[count] = null;
      account(e, -1);
    }
    return e;
  }

  private static String firstProblem(String a, String b) {
    return a != null ? a : b;
  }

  private static Result wrongType(long revision, String key, String what) {
    return Results.of(revision, Code.WRONG_TYPE, "key \"" + key + "\" holds " + what);
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    new FrozenEntries(Arrays.copyOf(slots, count)).writeSection(out);
  }

  /**
   * The entries as they are now, written later by another thread: a copy of the slots, which share
   * the entries until they next change ({@link #mutable}). Under the state lock it costs an array
   * copy; sorting them by key waits for the first write.
   */
  @Override
  public Frozen freeze() {
    Entry[] frozen = Arrays.copyOf(slots, count);
    generation++;
    return new FrozenEntries(frozen);
  }

  /** Entries that no longer change, written in key order. */
  private static final class FrozenEntries implements Frozen {
    private static final Comparator<Entry> BY_KEY = Comparator.comparing(e -> e.key);

    private final Entry[] entries;
    private boolean sorted;

    FrozenEntries(Entry[] entries) {
      this.entries = entries;
    }

    @Override
    public synchronized void writeSection(DataOutputStream out) throws IOException {
      if (!sorted) {
        Arrays.sort(entries, BY_KEY);
        sorted = true;
      }
      out.writeInt(entries.length);
      for (Entry e : entries) {
        writeEntry(out, e);
      }
    }

    /** Summed from the entries, in any order: the snapshot writer does not encode them twice. */
    @Override
    public long length() {
      long n = 4;
      for (Entry e : entries) {
        n += entryLength(e);
      }
      return n;
    }
  }

  /** The bytes {@link #writeEntry} writes for {@code e}. */
  private static long entryLength(Entry e) {
    long n = (long) StateSection.stringLength(e.key) + 1 + 3 * Long.BYTES;
    n += StateSection.stringLength(e.lease == null ? "" : e.lease);
    if (e.owner != null) {
      n += StateSection.stringLength(e.owner);
    }
    if (e.isList()) {
      n += Integer.BYTES;
      for (ByteString b : e.elements) {
        n += StateSection.bytesLength(b);
      }
    } else {
      n += StateSection.bytesLength(e.value);
    }
    return n;
  }

  private static void writeEntry(DataOutputStream out, Entry e) throws IOException {
    StateSection.writeString(out, e.key);
    out.writeByte((e.isList() ? 1 : 0) | (e.owner != null ? OWNED : 0));
    out.writeLong(e.version);
    out.writeLong(e.createRevision);
    out.writeLong(e.modRevision);
    StateSection.writeString(out, e.lease == null ? "" : e.lease);
    if (e.owner != null) {
      StateSection.writeString(out, e.owner);
    }
    if (e.isList()) {
      out.writeInt(e.elements.size());
      for (ByteString b : e.elements) {
        StateSection.writeBytes(out, b);
      }
    } else {
      StateSection.writeBytes(out, e.value);
    }
  }

  /** Reads the section; the leases it names must have been read (their section comes first). */
  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    int n = StateSection.count(in.readInt(), "key");
    for (int i = 0; i < n; i++) {
      String key = StateSection.readString(in);
      if (index.containsKey(key)) {
        throw new SnapshotFormatException("key \"" + key + "\" is in the section twice");
      }
      Entry e = new Entry(key, generation);
      int kind = in.readByte() & 0xff;
      e.version = in.readLong();
      e.createRevision = in.readLong();
      e.modRevision = in.readLong();
      String lease = StateSection.readString(in);
      if ((kind & OWNED) != 0) {
        e.owner = StateSection.readString(in);
        kind &= ~OWNED;
      }
      if (kind == 1) {
        int count = StateSection.count(in.readInt(), "list element");
        List<ByteString> elements = new ArrayList<>(Math.min(count, 1024));
        e.bytes = ENTRY_OVERHEAD + 2L * key.length();
        for (int j = 0; j < count; j++) {
          ByteString b = StateSection.readBytes(in);
          elements.add(b);
          e.bytes += ELEMENT_OVERHEAD + b.size();
        }
        e.elements = elements;
      } else if (kind == 0) {
        e.value = StateSection.readBytes(in);
        e.bytes = footprint(key, e.value);
      } else {
        throw new SnapshotFormatException("key \"" + key + "\": unknown kind " + kind);
      }
      if (!lease.isEmpty()) {
        if (!leases.exists(lease)) {
          throw new SnapshotFormatException("key \"" + key + "\": unknown lease " + lease);
        }
        attach(key, e, lease);
      }
      add(e);
      account(e, 1);
    }
  }
}
