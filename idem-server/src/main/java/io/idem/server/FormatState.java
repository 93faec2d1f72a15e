package io.idem.server;

import io.idem.core.SnapshotFormatException;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * The log format in force: the version every leader writes ({@link IdemStateMachine#writeFormat}).
 * It is set by the first configuration (to the bootstrapping leader's own version) and raised by an
 * operator's configuration change once every member runs code that applies the new version ({@link
 * ConfigState#configure} decides; this domain only holds the value). So a member of older code
 * never meets an entry it cannot apply, which it would apply as a no-op and diverge.
 *
 * <p>Snapshot section 7 (state snapshot version 7): {@code int logFormat}. Older snapshots have
 * none: a configured state read from one is at {@link #BEFORE_THE_GATE}, an unconfigured one at 0.
 * The digest leaves the section out while it holds what an older snapshot implies ({@link
 * #pristine}), so that such a state keeps its digest.
 *
 * <p>Not thread-safe.
 */
final class FormatState implements StateSection {
  /**
   * The log format of a configured state that recorded none: the newest version written before the
   * format in force existed, when every leader wrote its own code's version.
   */
  static final int BEFORE_THE_GATE = 5;

  private final ConfigState configuration;

  /** The format in force; 0 until a configuration is applied. */
  private int logFormat;

  FormatState(ConfigState configuration) {
    this.configuration = configuration;
  }

  /** The log format in force; 0 until a configuration is applied. */
  int logFormat() {
    return logFormat;
  }

  /** Sets the format in force (only {@link ConfigState} does, when it applies a configuration). */
  void set(int format) {
    logFormat = format;
  }

  /** Whether it holds what a snapshot from before this section implies. */
  boolean pristine() {
    return logFormat == (configuration.configured() ? BEFORE_THE_GATE : 0);
  }

  /** After a snapshot without this section was read: what it implies. */
  void restoreImplied() {
    if (logFormat == 0 && configuration.configured()) {
      logFormat = BEFORE_THE_GATE;
    }
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    out.writeInt(logFormat);
  }

  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    logFormat = in.readInt();
    if (logFormat < 0) {
      throw new SnapshotFormatException("log format in force " + logFormat);
    }
  }
}
