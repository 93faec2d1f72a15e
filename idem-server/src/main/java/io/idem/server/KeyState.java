package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.core.KeyTable;
import io.idem.proto.AcquireKey;
import io.idem.proto.Code;
import io.idem.proto.CompleteKey;
import io.idem.proto.Fence;
import io.idem.proto.KeyOutcome;
import io.idem.proto.ReleaseKey;
import io.idem.proto.RenewKey;
import io.idem.proto.Result;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.Optional;

/**
 * The application idempotency keys domain: idem-core's {@link KeyTable} (the deterministic record
 * of each {@code (scope, key)}), the four key operations' answers, and the fence check of fenced
 * writes. The operations ride a client's session, so each is applied exactly once. Tokens are log
 * positions and time is log time, both supplied by {@link ReplicatedState}. Not thread-safe.
 *
 * <p>The table's bounds are {@link KeyTable.Bounds#DEFAULTS}, constants for now (not part of the
 * replicated configuration); they are carried in the snapshot, and a restored table keeps the
 * bounds its snapshot carries.
 *
 * <p>Snapshot section (id 6, since snapshot version 5): the key table's own snapshot ({@link
 * KeyTable#writeSnapshot}: its bounds, the last token and the records in the table's order, with
 * its own CRC32C; in snapshot version 5, the table's version 1, in key order). Older snapshots are
 * read with an empty table.
 */
final class KeyState implements StateSection {

  /** The digest of an empty table: a state without keys keeps the digest it had before keys. */
  private static final String EMPTY_DIGEST = new KeyTable(KeyTable.Bounds.DEFAULTS).digest();

  private KeyTable table = new KeyTable(KeyTable.Bounds.DEFAULTS);

  /** The table (read-only use: tests and the digest). */
  KeyTable table() {
    return table;
  }

  /** Whether the table is as a new one: no record, no token ever given, default bounds. */
  boolean pristine() {
    return table.size() == 0 && table.digest().equals(EMPTY_DIGEST);
  }

  /** The key table's digest (hex SHA-256 of its snapshot encoding). */
  String digest() {
    return table.digest();
  }

  /**
   * The table's capacity in log format 5 and later: a million records, or 512 MiB of keys,
   * fingerprints and responses, whichever comes first (a new key beyond it is {@code
   * TOO_MANY_KEYS}). A constant of the format, so every replica decides with the same one; format 4
   * entries had none.
   */
  static final KeyTable.Capacity CAPACITY = new KeyTable.Capacity(1_000_000, 512L << 20);

  /**
   * Acquires a key under {@code token} (the command's log position) at log time {@code now}, within
   * {@code capacity}.
   */
  Result acquire(long revision, AcquireKey a, long token, long now, KeyTable.Capacity capacity) {
    return acquire(revision, a, token, now, capacity, null);
  }

  /**
   * As {@link #acquire(long, AcquireKey, long, long, KeyTable.Capacity)}, charging a new record to
   * {@code payer} (null: nobody): a new key is refused with {@code NO_SPACE} while the backend is
   * full, and with {@code QUOTA_EXCEEDED} once the payer holds its {@code key_records} or {@code
   * key_bytes}. Existing keys are answered as ever, and a completion is never refused: it must
   * settle what was acquired.
   */
  Result acquire(
      long revision, AcquireKey a, long token, long now, KeyTable.Capacity capacity, Payer payer) {
    KeyTable.KeyId id = new KeyTable.KeyId(a.getScope(), a.getKey());
    KeyTable.Capacity quota = null;
    if (payer != null) {
      table.expire(now);
      if (payer.full() && table.currentToken(id) == 0) {
        return payer.noSpace(revision);
      }
      quota =
          new KeyTable.Capacity(
              (int) Math.min(payer.quotas().keyRecords(), Integer.MAX_VALUE),
              payer.quotas().keyBytes());
    }
    KeyTable.Acquisition r =
        table.acquire(
            id,
            a.getFingerprint().toByteArray(),
            a.getInProgressMs(),
            a.getRetentionMs(),
            token,
            now,
            capacity,
            payer == null ? null : payer.principal(),
            quota);
    if (r instanceof KeyTable.Acquisition.Acquired acq) {
      return outcome(revision, KeyOutcome.ACQUIRED)
          .setToken(acq.token())
          .setDeadlineMs(acq.deadline())
          .setDone(acq.takeover())
          .build();
    }
    if (r instanceof KeyTable.Acquisition.Completed c) {
      return outcome(revision, KeyOutcome.COMPLETED)
          .setResponse(ByteString.copyFrom(c.response()))
          .build();
    }
    if (r instanceof KeyTable.Acquisition.InProgress p) {
      return outcome(revision, KeyOutcome.IN_PROGRESS).setDeadlineMs(p.deadline()).build();
    }
    if (r instanceof KeyTable.Acquisition.Mismatch) {
      return outcome(revision, KeyOutcome.MISMATCH)
          .setMessage("key \"" + a.getKey() + "\" was used with another fingerprint")
          .build();
    }
    if (r instanceof KeyTable.Acquisition.Full f) {
      return Result.newBuilder()
          .setCode(Code.TOO_MANY_KEYS)
          .setMessage(f.reason())
          .setRevision(revision)
          .build();
    }
    if (r instanceof KeyTable.Acquisition.OverQuota) {
      KeyTable.Usage u = table.usageOf(payer.principal());
      return payer.overQuota(
          revision,
          u.records() >= quota.maxRecords() ? "key_records" : "key_bytes",
          u.records() + " key records of " + u.bytes() + " bytes",
          u.records() >= quota.maxRecords() ? quota.maxRecords() : quota.maxBytes());
    }
    return Results.invalid(revision, ((KeyTable.Acquisition.Invalid) r).reason());
  }

  Result complete(long revision, CompleteKey c, long now) {
    return settled(
        revision,
        table.complete(
            new KeyTable.KeyId(c.getScope(), c.getKey()),
            c.getToken(),
            c.getResponse().toByteArray(),
            now));
  }

  Result release(long revision, ReleaseKey r, long now) {
    return settled(
        revision, table.release(new KeyTable.KeyId(r.getScope(), r.getKey()), r.getToken(), now));
  }

  Result renew(long revision, RenewKey r, long now) {
    return settled(
        revision,
        table.renew(
            new KeyTable.KeyId(r.getScope(), r.getKey()), r.getToken(), r.getExtensionMs(), now));
  }

  /**
   * How fenced writes are judged under an entry's log format (which {@link ReplicatedState} maps).
   */
  enum FenceRules {
    /**
     * Format 4: only a record with a greater token refuses; a key without a record lets the write
     * through.
     */
    NO_NEWER_TOKEN,
    /**
     * Formats 5 to 7: the write goes through only if the key has a record whose token equals the
     * fence's, so a stale owner, a released or expired key and a token never handed out are all
     * refused.
     */
    EXACT_TOKEN,
    /**
     * Since format 8: as {@link #EXACT_TOKEN}, and only while the log time is at or before the
     * record's owner deadline (inclusive, as {@link KeyTable#acquire} holds it): a token holds its
     * key as a lease does, so a write that reaches the log after the deadline is refused even if
     * nobody took the key over yet.
     */
    UNTIL_DEADLINE
  }

  /**
   * The refusal of a write fenced by {@code f}, or null if it may go through under {@code rules}.
   * Records due at {@code now} are expired first, so the judgement does not depend on when the
   * table last expired them.
   */
  Result fenceRefusal(long revision, Fence f, long now, FenceRules rules) {
    table.expire(now);
    KeyTable.KeyId id = new KeyTable.KeyId(f.getScope(), f.getKey());
    long current = table.currentToken(id);
    boolean through =
        switch (rules) {
          case NO_NEWER_TOKEN -> current <= f.getToken();
          case EXACT_TOKEN -> table.holds(id, f.getToken());
          case UNTIL_DEADLINE -> table.holds(id, f.getToken(), now);
        };
    if (through) {
      return null;
    }
    String why;
    if (current == 0) {
      why = "has no record (never acquired, released or expired)";
    } else if (current > f.getToken()) {
      why = "has token " + current + "; the write's fence token " + f.getToken() + " is stale";
    } else if (current < f.getToken()) {
      why = "has token " + current + ", not the write's fence token " + f.getToken();
    } else {
      // The record holds the fence's token: refused because its owner's deadline passed.
      long deadline = table.view(id, now).orElseThrow().deadline();
      why =
          "is held by the write's fence token "
              + current
              + " only until its owner's deadline, which passed: deadline "
              + deadline
              + " ms, log time "
              + now
              + " ms";
    }
    return Result.newBuilder()
        .setCode(Code.FENCED_WRITE)
        .setMessage("key \"" + f.getKey() + "\" " + why)
        .setRevision(revision)
        .setToken(current)
        .build();
  }

  /**
   * Whether {@code c}'s token owns its key in progress at {@code now} (after expiring what is due):
   * the condition under which a complete, and its effect, may apply.
   */
  boolean owns(CompleteKey c, long now) {
    table.expire(now);
    return table.isOwner(new KeyTable.KeyId(c.getScope(), c.getKey()), c.getToken());
  }

  /** The record of {@code (scope, key)} as of {@code now}, for a read. */
  Optional<KeyTable.View> view(String scope, String key, long now) {
    return table.view(new KeyTable.KeyId(scope, key), now);
  }

  /** Drops the records whose retention ended before {@code now}. */
  void expire(long now) {
    table.expire(now);
  }

  int size() {
    return table.size();
  }

  /** The bytes a key record costs beyond its key, fingerprint and response, in the estimate. */
  static final long RECORD_OVERHEAD = 160;

  /** The key records' share of the state's size estimate. */
  long bytes() {
    return table.bytes() + table.size() * RECORD_OVERHEAD;
  }

  private static Result settled(long revision, KeyTable.Settlement s) {
    if (s instanceof KeyTable.Settlement.Done d) {
      return outcome(revision, KeyOutcome.SETTLED).setDeadlineMs(d.deadline()).build();
    }
    if (s instanceof KeyTable.Settlement.Fenced f) {
      return outcome(revision, KeyOutcome.KEY_FENCED)
          .setMessage("the token is not the key's current one")
          .setToken(f.current())
          .build();
    }
    return Results.invalid(revision, ((KeyTable.Settlement.Invalid) s).reason());
  }

  private static Result.Builder outcome(long revision, KeyOutcome o) {
    return Results.ok(revision).setKeyOutcome(o);
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    table.writeSnapshot(out);
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    table = KeyTable.readSnapshot(in);
  }
}
