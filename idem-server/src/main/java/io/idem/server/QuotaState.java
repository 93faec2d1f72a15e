package io.idem.server;

import io.idem.core.SnapshotFormatException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * The quotas half of the replicated configuration (log format 7 and later): every principal's
 * default {@link Quotas}, the backend budget, and the {@code NO_SPACE} alarm. {@link ConfigState}
 * sets the first two when it applies a configuration; {@link ReplicatedState} raises and clears the
 * alarm from the state's estimated size ({@link ReplicatedState#backendUsed}).
 *
 * <p>The alarm, like etcd's: while it is raised, a command that would grow the state (a new
 * session, a write that adds bytes, a new lease or key record) is refused with {@code NO_SPACE};
 * reads, deletes, completions, releases, renewals and keep-alives go on. It is raised when the
 * estimated size reaches the budget, and cleared at the end of the first entry after which it is
 * below {@link #CLEAR_PERCENT} of the budget: the gap keeps it from flapping at the edge. Only log
 * entries move it, so every replica holds the same.
 *
 * <p>Snapshot section 9 (state snapshot version 8): {@code long} per default quota in {@link
 * Quotas#NAMES} order, {@code long backendBytes, boolean alarm}. Older snapshots have none: they
 * are read with the code's defaults and no alarm ({@link #pristine}), which the digest leaves out.
 *
 * <p>Not thread-safe.
 */
final class QuotaState implements StateSection {
  /** Default backend budget: 1 GiB of estimated state. Size the heap at least three times it. */
  static final long DEFAULT_BACKEND_BYTES = 1L << 30;

  /** The smallest backend budget a configuration may set. */
  static final long MIN_BACKEND_BYTES = 1L << 20;

  /** The largest backend budget a configuration may set. */
  static final long MAX_BACKEND_BYTES = 256L << 30;

  /** The alarm clears once the state is below this share of the budget. */
  static final int CLEAR_PERCENT = 90;

  private Quotas defaults = Quotas.DEFAULTS;
  private long backendBytes = DEFAULT_BACKEND_BYTES;
  private boolean alarm;

  Quotas defaults() {
    return defaults;
  }

  long backendBytes() {
    return backendBytes;
  }

  boolean alarm() {
    return alarm;
  }

  /** Whether it holds what a snapshot from before this section implies. */
  boolean pristine() {
    return defaults.equals(Quotas.DEFAULTS) && backendBytes == DEFAULT_BACKEND_BYTES && !alarm;
  }

  /**
   * Why this change cannot apply (naming the first bad value), or null: each quota 0 or in range,
   * the budget 0 or in {@code [MIN_BACKEND_BYTES, MAX_BACKEND_BYTES]}.
   */
  static String problem(io.idem.proto.Quotas quotas, long backend) {
    String bad = Quotas.problem(quotas);
    if (bad == null
        && backend != 0
        && (backend < MIN_BACKEND_BYTES || backend > MAX_BACKEND_BYTES)) {
      bad =
          "backend_bytes must be in ["
              + MIN_BACKEND_BYTES
              + ", "
              + MAX_BACKEND_BYTES
              + "], got "
              + backend;
    }
    return bad;
  }

  /** Applies a change that {@link #problem} accepted: its non-zero values replace the current. */
  void configure(io.idem.proto.Quotas quotas, long backend) {
    defaults = defaults.with(quotas);
    if (backend != 0) {
      backendBytes = backend;
    }
  }

  /**
   * Whether a command that grows the state must be refused, the state being {@code used} bytes: the
   * alarm is raised, or is raised now because {@code used} reached the budget.
   */
  boolean full(long used) {
    if (!alarm && used >= backendBytes) {
      alarm = true;
    }
    return alarm;
  }

  /** After an entry: raises the alarm at the budget, clears it below {@link #CLEAR_PERCENT}. */
  void settle(long used) {
    if (used >= backendBytes) {
      alarm = true;
    } else if (alarm && used < backendBytes / 100 * CLEAR_PERCENT) {
      alarm = false;
    }
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    for (long v : defaults.values()) {
      out.writeLong(v);
    }
    out.writeLong(backendBytes);
    out.writeBoolean(alarm);
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    long[] v = new long[Quotas.NAMES.size()];
    long[] hard = Quotas.HARD.values();
    for (int i = 0; i < v.length; i++) {
      v[i] = in.readLong();
      if (v[i] < 1 || v[i] > hard[i]) {
        throw new SnapshotFormatException(
            "quota " + Quotas.NAMES.get(i) + " out of [1, " + hard[i] + "]: " + v[i]);
      }
    }
    long backend = in.readLong();
    if (backend < MIN_BACKEND_BYTES || backend > MAX_BACKEND_BYTES) {
      throw new SnapshotFormatException("backend budget out of range: " + backend);
    }
    defaults = Quotas.of(v);
    backendBytes = backend;
    alarm = in.readBoolean();
  }
}
