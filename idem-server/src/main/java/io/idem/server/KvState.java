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
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The key-value domain: the replicated map, its operations and their answers, and which keys live
 * under which lease. A key holds either a value or, once written by {@code append}, a list of
 * elements. Keys are ordered by {@link String#compareTo}, so iteration (for snapshots and digests)
 * is deterministic. Not thread-safe.
 *
 * <p>Lookups go through a hash index over the same entries: the ordered map alone cost a third of a
 * follower's CPU at 256,000 keys (tree descents comparing keys with a common prefix). Only new and
 * removed keys touch the tree.
 *
 * <p>Snapshot section: {@code int count}, then per key in key order: {@code utf key, byte kind (0
 * value, 1 list), long version, long createRevision, long modRevision, utf lease ("" for none)},
 * and the value ({@code int length} + bytes) or the list ({@code int count}, then length + bytes
 * each). It follows the leases' section, whose leases its keys name.
 */
final class KvState implements StateSection {

  /** One key's state. */
  private static final class Entry {
    ByteString value;
    List<ByteString> elements;
    long version;
    long createRevision;
    long modRevision;
    String lease;

    boolean isList() {
      return elements != null;
    }

    /** A copy of its fields now; a list's elements are copied, its values (immutable) shared. */
    Entry copy() {
      Entry c = new Entry();
      c.value = value;
      c.elements = elements == null ? null : List.copyOf(elements);
      c.version = version;
      c.createRevision = createRevision;
      c.modRevision = modRevision;
      c.lease = lease;
      return c;
    }
  }

  private final ConfigState config;
  private final LeaseState leases;
  private final TreeMap<String, Entry> entries = new TreeMap<>();
  private final HashMap<String, Entry> index = new HashMap<>();

  /** The keys under each lease, by lease name. Only looked up, never iterated. */
  private final HashMap<String, TreeSet<String>> leased = new HashMap<>();

  /**
   * @param config the replicated limits (keys and values)
   * @param leases the leases a put may name
   */
  KvState(ConfigState config, LeaseState leases) {
    this.config = config;
    this.leases = leases;
  }

  int size() {
    return entries.size();
  }

  /** Writes a plain value, under a lease if it names one (else under none). */
  Result put(long revision, Put p) {
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
    Entry e = write(p.getKey(), p.getValue(), revision);
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
      attach(key, e, null);
    }
    return Results.ok(revision).setDone(e != null).build();
  }

  Result compareAndSet(long revision, CompareAndSet c) {
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
    Entry written = write(c.getKey(), c.getValue(), revision);
    return Results.ok(revision).setVersion(written.version).setDone(true).build();
  }

  Result increment(long revision, Increment inc) {
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
    Entry written = write(inc.getKey(), ByteString.copyFromUtf8(Long.toString(next)), revision);
    return Results.ok(revision).setVersion(written.version).setNumber(next).setDone(true).build();
  }

  Result append(long revision, Append a) {
    Limits limits = config.limits();
    String bad = firstProblem(limits.checkKey(a.getKey()), limits.checkValue(a.getValue().size()));
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Entry e = index.get(a.getKey());
    if (e != null && !e.isList()) {
      return wrongType(revision, a.getKey(), "a plain value (written by put)");
    }
    if (e == null) {
      e = new Entry();
      e.createRevision = revision;
      e.elements = new ArrayList<>();
      add(a.getKey(), e);
    }
    e.elements.add(a.getValue());
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

  /** Writes a plain value, keeping the key's lease; the caller checked it is not a list. */
  private Entry write(String key, ByteString value, long revision) {
    Entry e = index.get(key);
    if (e == null) {
      e = new Entry();
      e.createRevision = revision;
      add(key, e);
    }
    e.value = value;
    e.elements = null;
    e.version++;
    e.modRevision = revision;
    return e;
  }

  /** Moves {@code key} from its current lease (if any) to {@code lease} (may be null). */
  private void attach(String key, Entry e, String lease) {
    if (e.lease != null) {
      TreeSet<String> old = leased.get(e.lease);
      if (old != null) {
        old.remove(key);
      }
    }
    e.lease = lease;
    if (lease != null) {
      leased.computeIfAbsent(lease, l -> new TreeSet<>()).add(key);
    }
  }

  private void add(String key, Entry e) {
    entries.put(key, e);
    index.put(key, e);
  }

  private Entry remove(String key) {
    index.remove(key);
    return entries.remove(key);
  }

  private static String firstProblem(String a, String b) {
    return a != null ? a : b;
  }

  private static Result wrongType(long revision, String key, String what) {
    return Results.of(revision, Code.WRONG_TYPE, "key \"" + key + "\" holds " + what);
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    out.writeInt(entries.size());
    for (Map.Entry<String, Entry> kv : entries.entrySet()) {
      writeEntry(out, kv.getKey(), kv.getValue());
    }
  }

  /**
   * A copy of every entry (cheap: values are immutable and shared; lists are copied), written
   * later.
   */
  @Override
  public Frozen freeze() {
    String[] keys = new String[entries.size()];
    Entry[] copies = new Entry[keys.length];
    int i = 0;
    for (Map.Entry<String, Entry> kv : entries.entrySet()) {
      keys[i] = kv.getKey();
      copies[i++] = kv.getValue().copy();
    }
    return out -> {
      out.writeInt(keys.length);
      for (int j = 0; j < keys.length; j++) {
        writeEntry(out, keys[j], copies[j]);
      }
    };
  }

  private static void writeEntry(DataOutputStream out, String key, Entry e) throws IOException {
    StateSection.writeString(out, key);
    out.writeByte(e.isList() ? 1 : 0);
    out.writeLong(e.version);
    out.writeLong(e.createRevision);
    out.writeLong(e.modRevision);
    StateSection.writeString(out, e.lease == null ? "" : e.lease);
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
      Entry e = new Entry();
      int kind = in.readByte();
      e.version = in.readLong();
      e.createRevision = in.readLong();
      e.modRevision = in.readLong();
      String lease = StateSection.readString(in);
      if (kind == 1) {
        int count = StateSection.count(in.readInt(), "list element");
        List<ByteString> elements = new ArrayList<>(Math.min(count, 1024));
        for (int j = 0; j < count; j++) {
          elements.add(StateSection.readBytes(in));
        }
        e.elements = elements;
      } else if (kind == 0) {
        e.value = StateSection.readBytes(in);
      } else {
        throw new SnapshotFormatException("key \"" + key + "\": unknown kind " + kind);
      }
      if (!lease.isEmpty()) {
        if (!leases.exists(lease)) {
          throw new SnapshotFormatException("key \"" + key + "\": unknown lease " + lease);
        }
        attach(key, e, lease);
      }
      add(key, e);
    }
  }
}
