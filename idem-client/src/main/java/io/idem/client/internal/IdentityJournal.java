package io.idem.client.internal;

import com.google.protobuf.InvalidProtocolBufferException;
import io.idem.proto.Operation;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.zip.CRC32C;
import org.jspecify.annotations.Nullable;

/**
 * The client's durable memory, so that a restarted process can resume its session and resend what
 * was in flight with the same numbers: exactly-once across a client restart.
 *
 * <p>An append-only file of records {@code int length, int crc32c, payload}. Payloads: a pending
 * registration (name, nonce, TTL and the secret it chose: written before the Register RPC, so that
 * a crash before the answer can retry the same registration with the same secret; records written
 * before the secret was chosen by the client have none), the identity (name, id, secret, TTL),
 * requests sent (number and operation: made durable before they leave), and requests answered. On
 * open, records are replayed up to the first torn or corrupt one (a crash mid-write tears only the
 * tail), and the file is compacted to what is still needed.
 *
 * <p>The file and its temporary copy are created 0600, and a directory created for them 0700 (on a
 * file system with POSIX permissions): the file holds the session's secret. Every open rewrites the
 * file, so a file others could read is 0600 after it.
 *
 * <p>Not thread-safe: the session driver calls it from one thread at a time (its effect runner),
 * never under a lock. Every write failure is an {@link IOException}.
 */
public final class IdentityJournal implements AutoCloseable {
  private static final byte PENDING = 1;
  private static final byte IDENTITY = 2;
  private static final byte SENT = 3;
  private static final byte DONE = 4;

  /** A pending registration with the secret it chose (PENDING's payload and two longs). */
  private static final byte PENDING_WITH_SECRET = 5;

  private static final int MAX_RECORD = 64 << 20;
  private static final long COMPACT_BYTES = 4 << 20;

  /** The identity of a registered session. */
  public record Identity(String name, long clientId, long secretHi, long secretLo, long ttlMs) {}

  /**
   * A registration sent but not yet answered, with the secret it chose for the new session (0 with
   * 0: none, the leader chose).
   */
  public record Pending(String name, long nonce, long ttlMs, long secretHi, long secretLo) {
    /** A registration that chose no secret. */
    public Pending(String name, long nonce, long ttlMs) {
      this(name, nonce, ttlMs, 0, 0);
    }
  }

  private final Path file;
  private FileChannel channel;
  private @Nullable Identity identity;
  private @Nullable Pending pending;
  private final TreeMap<Long, Operation> outstanding = new TreeMap<>();
  private boolean dirty;

  // channel: opened by rewrite(), which open() calls before it returns the journal.
  @SuppressWarnings("NullAway.Init")
  private IdentityJournal(Path file) {
    this.file = file;
  }

  /** Opens (or creates) the journal at {@code file} and replays it. */
  public static IdentityJournal open(Path file) throws IOException {
    IdentityJournal j = new IdentityJournal(file);
    if (Files.exists(file)) {
      j.replay(Files.readAllBytes(file));
    }
    j.rewrite();
    return j;
  }

  public @Nullable Identity identity() {
    return identity;
  }

  public @Nullable Pending pending() {
    return pending;
  }

  /** Requests sent and not answered, by number. */
  public SortedMap<Long, Operation> outstanding() {
    return Collections.unmodifiableSortedMap(outstanding);
  }

  /** Durably records a registration attempt that chose no secret, before it is sent. */
  public void pendingRegistration(String name, long nonce, long ttlMs) throws IOException {
    pendingRegistration(name, nonce, ttlMs, 0, 0);
  }

  /**
   * Durably records a registration attempt and the secret it chose for the new session, before it
   * is sent.
   */
  public void pendingRegistration(String name, long nonce, long ttlMs, long secretHi, long secretLo)
      throws IOException {
    pending = new Pending(name, nonce, ttlMs, secretHi, secretLo);
    append(PENDING_WITH_SECRET, pendingBody(pending));
    sync();
  }

  /** Durably records a granted session; forgets requests of any earlier session. */
  public void identity(Identity id) throws IOException {
    identity = id;
    pending = null;
    outstanding.clear();
    rewrite();
  }

  /** Forgets the identity: the session is gone. */
  public void forget() throws IOException {
    identity = null;
    pending = null;
    outstanding.clear();
    rewrite();
  }

  /** Records requests about to be sent; durable when this returns. */
  public void sent(Map<Long, Operation> requests) throws IOException {
    for (Map.Entry<Long, Operation> r : requests.entrySet()) {
      outstanding.put(r.getKey(), r.getValue());
      append(SENT, sentBody(r.getKey(), r.getValue()));
    }
    sync();
  }

  /** Records an answered request. Made durable with the next {@link #sync()}. */
  public void done(long seq) throws IOException {
    if (outstanding.remove(seq) != null) {
      append(DONE, out -> out.writeLong(seq));
      dirty = true;
    }
  }

  /** Forces what was appended to disk; compacts a large file. */
  public void sync() throws IOException {
    channel.force(false);
    dirty = false;
    if (channel.size() > COMPACT_BYTES) {
      rewrite();
    }
  }

  /** Whether answered requests are recorded but not yet durable. */
  public boolean dirty() {
    return dirty;
  }

  @Override
  public void close() throws IOException {
    if (channel != null) {
      channel.force(false);
      channel.close();
    }
  }

  // ---- encoding ----

  private interface Body {
    void write(DataOutputStream out) throws IOException;
  }

  private void append(byte type, Body body) throws IOException {
    channel.write(ByteBuffer.wrap(record(type, body)));
  }

  private static Body pendingBody(Pending p) {
    return out -> {
      writeString(out, p.name());
      out.writeLong(p.nonce());
      out.writeLong(p.ttlMs());
      out.writeLong(p.secretHi());
      out.writeLong(p.secretLo());
    };
  }

  private static Body identityBody(Identity id) {
    return out -> {
      writeString(out, id.name());
      out.writeLong(id.clientId());
      out.writeLong(id.secretHi());
      out.writeLong(id.secretLo());
      out.writeLong(id.ttlMs());
    };
  }

  private static Body sentBody(long seq, Operation op) {
    byte[] bytes = op.toByteArray();
    return out -> {
      out.writeLong(seq);
      out.writeInt(bytes.length);
      out.write(bytes);
    };
  }

  private static byte[] record(byte type, Body body) throws IOException {
    ByteArrayOutputStream payload = new ByteArrayOutputStream();
    DataOutputStream p = new DataOutputStream(payload);
    p.writeByte(type);
    body.write(p);
    byte[] bytes = payload.toByteArray();
    CRC32C crc = new CRC32C();
    crc.update(bytes);
    ByteBuffer rec = ByteBuffer.allocate(8 + bytes.length);
    rec.putInt(bytes.length).putInt((int) crc.getValue()).put(bytes);
    return rec.array();
  }

  /** Writes the live records to a new file and renames it over the old one, atomically. */
  private void rewrite() throws IOException {
    if (channel != null) {
      channel.close();
    }
    Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
    ByteArrayOutputStream all = new ByteArrayOutputStream();
    if (pending != null) {
      all.write(record(PENDING_WITH_SECRET, pendingBody(pending)));
    }
    if (identity != null) {
      all.write(record(IDENTITY, identityBody(identity)));
    }
    for (Map.Entry<Long, Operation> r : outstanding.entrySet()) {
      all.write(record(SENT, sentBody(r.getKey(), r.getValue())));
    }
    Path parent = file.toAbsolutePath().getParent();
    if (parent != null) {
      OwnerOnly.createDirectories(parent);
    }
    // The secret is in there: 0600 from the start, and the rename gives the file that mode.
    try (FileChannel c = OwnerOnly.createFile(tmp)) {
      c.write(ByteBuffer.wrap(all.toByteArray()));
      c.force(true);
    }
    Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    channel = FileChannel.open(file, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
    dirty = false;
  }

  private void replay(byte[] bytes) throws IOException {
    ByteBuffer buf = ByteBuffer.wrap(bytes);
    while (buf.remaining() >= 8) {
      int len = buf.getInt();
      int crc = buf.getInt();
      if (len < 1 || len > MAX_RECORD || len > buf.remaining()) {
        return; // a torn tail
      }
      byte[] payload = new byte[len];
      buf.get(payload);
      CRC32C c = new CRC32C();
      c.update(payload);
      if ((int) c.getValue() != crc) {
        return; // a torn or corrupt tail
      }
      apply(new DataInputStream(new java.io.ByteArrayInputStream(payload)));
    }
  }

  private void apply(DataInputStream in) throws IOException {
    switch (in.readByte()) {
      case PENDING -> pending = new Pending(readString(in), in.readLong(), in.readLong());
      case PENDING_WITH_SECRET ->
          pending =
              new Pending(
                  readString(in), in.readLong(), in.readLong(), in.readLong(), in.readLong());
      case IDENTITY -> {
        identity =
            new Identity(
                readString(in), in.readLong(), in.readLong(), in.readLong(), in.readLong());
        pending = null;
        outstanding.clear();
      }
      case SENT -> {
        long seq = in.readLong();
        byte[] op = in.readNBytes(in.readInt());
        try {
          outstanding.put(seq, Operation.parseFrom(op));
        } catch (InvalidProtocolBufferException e) {
          throw new IOException("identity journal " + file + ": bad operation record", e);
        }
      }
      case DONE -> outstanding.remove(in.readLong());
      default -> throw new IOException("identity journal " + file + ": unknown record type");
    }
  }

  private static void writeString(DataOutputStream out, String s) throws IOException {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    out.writeInt(b.length);
    out.write(b);
  }

  private static String readString(DataInputStream in) throws IOException {
    return new String(in.readNBytes(in.readInt()), StandardCharsets.UTF_8);
  }

  /** For tests: the numbers of the outstanding requests. */
  List<Long> outstandingNumbers() {
    return List.copyOf(outstanding.keySet());
  }
}
