package io.idem.server;

import io.idem.core.SnapshotFormatException;
import io.idem.proto.Code;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.ConfigureReply;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;

/**
 * The replicated configuration domain ({@link ReplicatedConfig}): the {@link Limits} in force and
 * the log index that set them. The session bounds, the configuration's other half, live in the
 * session table ({@link SessionState}), whose own snapshot carries them; a change applies to both.
 *
 * <p>A configuration command also sets the log format in force ({@link FormatState}, which holds it
 * in a section of its own).
 *
 * <p>Snapshot section: {@code long revision} (0: none applied; the defaults decide), then, if above
 * 0, {@code int maxKeyBytes, int maxValueBytes, int maxNameChars, long maxLeaseTtlMs}. State
 * snapshots before version 3 have no such section: they are read as not configured.
 *
 * <p>Not thread-safe.
 */
final class ConfigState implements StateSection {
  private final SessionState sessions;
  private Limits limits = ReplicatedConfig.DEFAULTS.limits();

  /** The log index of the entry that set the configuration in force; 0: none yet (defaults). */
  private long revision;

  /** The log format in force, which a configuration command sets. */
  final FormatState format = new FormatState(this);

  /** The default quotas and the backend budget (log format 7), which it sets too. */
  final QuotaState quotas = new QuotaState();

  /** Which group of a cluster of several this is, which the bootstrap sets. */
  final GroupState groups = new GroupState();

  /**
   * @param sessions the session domain, which holds the session bounds
   */
  ConfigState(SessionState sessions) {
    this.sessions = sessions;
  }

  /** The configuration in force. */
  ReplicatedConfig current() {
    return new ReplicatedConfig(limits, sessions.bounds());
  }

  /** The limits in force; the defaults until a configuration is applied. */
  Limits limits() {
    return limits;
  }

  /** Whether a configuration was applied (else the defaults decide). */
  boolean configured() {
    return revision > 0;
  }

  /** The log index of the entry that set the configuration in force; 0: none. */
  long revision() {
    return revision;
  }

  /** The log format leaders write: 0 while not configured (the leader then writes its own). */
  int logFormat() {
    return format.logFormat();
  }

  /**
   * Applies a configuration change, entry {@code index}'s. A bootstrap command applies only while
   * no configuration was applied (first wins: leaders racing at bootstrap agree, whatever their
   * flags); a change replaces the non-zero fields. An out-of-range value refuses the whole command,
   * which changes nothing. Lowered bounds drop nothing already held: existing keys, values, leases
   * and sessions stay, and only later commands are judged by the new limits.
   *
   * @param since7 whether the entry is of log format 7 or later: only then are the quotas and the
   *     backend budget applied, and the limits held to the format's hard ranges ({@link
   *     ReplicatedConfig#with})
   */
  ConfigureReply configure(long index, ConfigureCmd cmd, boolean since7) {
    ConfigureReply.Builder reply = ConfigureReply.newBuilder().setCode(Code.OK);
    if (cmd.getBootstrap() && configured()) {
      return describe(reply);
    }
    // What the log says, never this node's code: a first configuration sets the bootstrapping
    // leader's format, or, from a leader that predates the format in force, the newest format
    // written before it; a later change may raise it.
    // (The upper bound is this code's version: the leader has checked that every member's code
    // applies the requested one, so every member decides alike.)
    int formatNext =
        format.logFormat() != 0
            ? format.logFormat()
            : cmd.getBootstrap() && cmd.getLogFormat() != 0
                ? cmd.getLogFormat()
                : FormatState.BEFORE_THE_GATE;
    if (!cmd.getBootstrap() && cmd.getLogFormat() != 0) {
      if (cmd.getLogFormat() < formatNext
          || cmd.getLogFormat() > ReplicatedState.LOG_FORMAT_VERSION) {
        return describe(
            reply
                .setCode(Code.INVALID_ARGUMENT)
                .setMessage(
                    "log_format "
                        + cmd.getLogFormat()
                        + " out of ["
                        + formatNext
                        + ", "
                        + ReplicatedState.LOG_FORMAT_VERSION
                        + "]: the format in force is never lowered"));
      }
      formatNext = cmd.getLogFormat();
    }
    try {
      String badGroup =
          cmd.getBootstrap() ? GroupState.problem(cmd.getGroup(), cmd.getGroupCount()) : null;
      if (badGroup != null) {
        throw new IllegalArgumentException(badGroup);
      }
      ReplicatedConfig next = current().with(cmd.getLimits(), cmd.getSessions(), since7);
      String badQuota = since7 ? QuotaState.problem(cmd.getQuotas(), cmd.getBackendBytes()) : null;
      if (badQuota != null) {
        throw new IllegalArgumentException(badQuota);
      }
      if (since7) {
        quotas.configure(cmd.getQuotas(), cmd.getBackendBytes());
      }
      if (cmd.getBootstrap()) {
        groups.set(cmd.getGroup(), cmd.getGroupCount());
      }
      limits = next.limits();
      sessions.reconfigure(next.sessions());
      revision = index;
      format.set(formatNext);
    } catch (IllegalArgumentException bad) {
      reply.setCode(Code.INVALID_ARGUMENT).setMessage(bad.getMessage());
    }
    return describe(reply);
  }

  /**
   * The answer to a configure command that is not applied: {@code code}, for reason {@code why}.
   */
  ConfigureReply refused(Code code, String why) {
    return describe(ConfigureReply.newBuilder().setCode(code).setMessage(why));
  }

  private ConfigureReply describe(ConfigureReply.Builder reply) {
    ReplicatedConfig now = current();
    return reply
        .setLimits(now.limitsProto())
        .setSessions(now.boundsProto())
        .setConfigRevision(revision)
        .setLogFormat(format.logFormat())
        .setQuotas(quotas.defaults().toProto())
        .setBackendBytes(quotas.backendBytes())
        .build();
  }

  @Override
  public void writeSection(DataOutputStream out) throws IOException {
    out.writeLong(revision);
    if (configured()) {
      out.writeInt(limits.maxKeyBytes());
      out.writeInt(limits.maxValueBytes());
      out.writeInt(limits.maxNameChars());
      out.writeLong(limits.maxLeaseTtlMs());
    }
  }

  /** Reads the section; the caller checks that the revision is not beyond the applied index. */
  @Override
  public void readSection(DataInputStream in, int formatVersion) throws IOException {
    revision = in.readLong();
    if (revision < 0) {
      throw new SnapshotFormatException("negative configuration revision " + revision);
    }
    if (configured()) {
      int key = in.readInt();
      int value = in.readInt();
      int name = in.readInt();
      long leaseTtl = in.readLong();
      String bad = Limits.problem(key, value, name, leaseTtl);
      if (bad != null) {
        throw new SnapshotFormatException("replicated limits: " + bad);
      }
      limits = new Limits(key, value, name, leaseTtl);
    }
  }
}
