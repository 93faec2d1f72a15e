package io.idem.server;

import com.google.protobuf.ByteString;
import io.idem.proto.ClaimCursor;
import io.idem.proto.Code;
import io.idem.proto.CommitCursor;
import io.idem.proto.CursorStep;
import io.idem.proto.GetReply;
import io.idem.proto.KeyOutcome;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.Result;
import java.nio.charset.StandardCharsets;

/**
 * Cursors (log format 9 and later): the consumed position of one stream, such as a Kafka consumer
 * group's partition, with the epoch of its latest claim. A cursor is a KV entry whose value reads
 * {@code idem-cursor epoch=E position=P} ({@code P} -1 until a commit), so snapshots, digests,
 * permissions and quotas treat it as the KV entry it is, and {@code idem kv get} shows it.
 *
 * <p>A claim raises the epoch. A commit names the epoch of its claim and is refused whole ({@code
 * CURSOR_FENCED}) under any other: a consumer that lost its partition and commits late is fenced by
 * the cursor itself, in the log, not by a check in the client. A commit's steps apply in order,
 * each with its effect and its key completion, and the cursor's position moves with them; the first
 * step that cannot apply stops the command there, after the steps before it.
 *
 * <p>Determinism: a function of the command, its log position and log time, and the replicated
 * state. Not thread-safe, like the state it belongs to.
 */
final class Cursors {

  /** The most steps one commit may carry. */
  static final int MAX_STEPS = 4096;

  private static final String PREFIX = "idem-cursor epoch=";
  private static final String POSITION = " position=";

  /** A cursor's value: its epoch and position (-1: none committed). */
  record Cursor(long epoch, long position) {
    ByteString encode() {
      return ByteString.copyFrom(PREFIX + epoch + POSITION + position, StandardCharsets.US_ASCII);
    }
  }

  /** Applies a step's effect (a write) for {@code payer}; the answer says whether it applied. */
  interface EffectRunner {
    Result run(long revision, Operation effect, Payer payer);
  }

  private final KvState kv;
  private final KeyState keys;

  Cursors(KvState kv, KeyState keys) {
    this.kv = kv;
    this.keys = keys;
  }

  /** Raises the cursor's epoch, creating it at position -1 if it is absent. */
  Result claim(long revision, ClaimCursor c, Payer payer) {
    Object read = read(revision, c.getKey());
    if (read instanceof Result refused) {
      return refused;
    }
    Cursor cur = (Cursor) read;
    Cursor next = new Cursor(cur == null ? 1 : cur.epoch() + 1, cur == null ? -1 : cur.position());
    Result w = write(revision, c.getKey(), next, payer);
    if (w.getCode() != Code.OK) {
      return w;
    }
    return w.toBuilder().setToken(next.epoch()).setPosition(next.position()).build();
  }

  /**
   * Applies the steps of a commit under its epoch, as {@link CommitCursor} says; {@code effects}
   * runs a step's write.
   */
  Result commit(long revision, long clock, CommitCursor c, Payer payer, EffectRunner effects) {
    String bad = check(c);
    if (bad != null) {
      return Results.invalid(revision, bad);
    }
    Object read = read(revision, c.getKey());
    if (read instanceof Result refused) {
      return refused;
    }
    Cursor cur = (Cursor) read;
    if (cur == null || cur.epoch() != c.getEpoch()) {
      long epoch = cur == null ? 0 : cur.epoch();
      return Result.newBuilder()
          .setCode(Code.CURSOR_FENCED)
          .setMessage(
              "cursor \""
                  + c.getKey()
                  + "\" is at epoch "
                  + epoch
                  + ", the commit's claim was epoch "
                  + c.getEpoch())
          .setRevision(revision)
          .setToken(epoch)
          .setPosition(cur == null ? -1 : cur.position())
          .build();
    }
    long position = cur.position();
    int done = 0;
    Result stop = null;
    for (CursorStep s : c.getStepsList()) {
      if (s.getPosition() <= position) {
        done++; // committed before: a resend after an unknown outcome, or a replay
        continue;
      }
      if (s.hasComplete() && !keys.owns(s.getComplete(), clock)) {
        stop = keys.complete(revision, s.getComplete(), clock); // KEY_FENCED, nothing changed
        break;
      }
      if (s.hasEffect()) {
        Result e = effects.run(revision, s.getEffect(), payer);
        if (e.getCode() != Code.OK) {
          stop = e;
          break;
        }
      }
      if (s.hasComplete()) {
        Result k = keys.complete(revision, s.getComplete(), clock);
        if (k.getKeyOutcome() != KeyOutcome.SETTLED) {
          throw new IllegalStateException("a complete checked as owned was refused: " + k);
        }
      }
      position = s.getPosition();
      done++;
    }
    if (position != cur.position()) {
      // The advance settles what the claim created: neither quotas nor the budget refuse it.
      Result w =
          write(
              revision,
              c.getKey(),
              new Cursor(cur.epoch(), position),
              payer == null ? null : payer.settling());
      if (w.getCode() != Code.OK) {
        throw new IllegalStateException("a cursor's advance was refused: " + w);
      }
    }
    Result.Builder out = stop == null ? Results.ok(revision) : stop.toBuilder();
    return out.setPosition(position).setStepsDone(done).build();
  }

  /** What makes a commit malformed as a whole, or null. */
  private static String check(CommitCursor c) {
    if (c.getStepsCount() > MAX_STEPS) {
      return "a commit carries at most " + MAX_STEPS + " steps, got " + c.getStepsCount();
    }
    long last = 0;
    for (int i = 0; i < c.getStepsCount(); i++) {
      CursorStep s = c.getSteps(i);
      if (s.getPosition() <= last) {
        return "step " + i + "'s position " + s.getPosition() + " is not above " + last;
      }
      last = s.getPosition();
      if (s.hasComplete() && s.getComplete().hasEffect()) {
        return "step " + i + "'s complete carries its own effect; put it in the step's effect";
      }
    }
    return null;
  }

  /**
   * The cursor at {@code key}, null if absent, or the refusal to answer (bad key, not a cursor).
   */
  private Object read(long revision, String key) {
    GetReply g = kv.get(key);
    if (g.getCode() != Code.OK) {
      return Results.of(revision, g.getCode(), g.getMessage());
    }
    if (!g.getFound()) {
      return null;
    }
    Cursor c = parse(g.getValue());
    if (c == null) {
      return Results.of(
          revision, Code.WRONG_TYPE, "key \"" + key + "\" holds a value that is not a cursor");
    }
    return c;
  }

  /** The cursor a value encodes, or null if it encodes none. */
  static Cursor parse(ByteString value) {
    String s = value.toString(StandardCharsets.US_ASCII);
    int p = s.indexOf(POSITION);
    if (!s.startsWith(PREFIX) || p < 0) {
      return null;
    }
    try {
      long epoch = Long.parseLong(s.substring(PREFIX.length(), p));
      long position = Long.parseLong(s.substring(p + POSITION.length()));
      if (epoch < 1 || position < -1) {
        return null;
      }
      return new Cursor(epoch, position);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  private Result write(long revision, String key, Cursor c, Payer payer) {
    return kv.put(revision, Put.newBuilder().setKey(key).setValue(c.encode()).build(), payer);
  }
}
