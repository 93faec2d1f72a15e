package io.idem.server;

import io.idem.core.SessionTableConfig;
import io.idem.proto.ConfigureCmd;
import io.idem.proto.SessionBounds;

/**
 * The configuration that decides answers: the {@link Limits} of keys, values and leases, and the
 * session table's bounds. Every replica must decide by the same values, so this is replicated
 * state: a {@code ConfigureCmd} in the log sets it, the snapshot carries it, and a node's own flags
 * ({@link ServerConfig#limits()}, {@link ServerConfig#sessions()}) only seed the bootstrap command
 * of a leader that finds none applied. Immutable.
 *
 * @param limits key, value, lease name and lease TTL limits
 * @param sessions window, max sessions, max session TTL and max session name length
 */
record ReplicatedConfig(Limits limits, SessionTableConfig sessions) {

  /** What every replica decides by before a configuration is applied: the code's constants. */
  static final ReplicatedConfig DEFAULTS =
      new ReplicatedConfig(Limits.DEFAULTS, SessionTableConfig.defaults());

  /** The bootstrap command a leader appends from its own flags (see {@link ConfigureCmd}). */
  static ReplicatedConfig of(ServerConfig local) {
    return new ReplicatedConfig(local.limits(), local.sessions());
  }

  /**
   * A bootstrap command that sets every field to this configuration's value, the log format in
   * force to this code's, and, if {@code authAdmin} is not empty, turns auth on with that principal
   * as admin.
   */
  ConfigureCmd bootstrapCommand(String authAdmin) {
    return ConfigureCmd.newBuilder()
        .setBootstrap(true)
        .setLimits(limitsProto())
        .setSessions(boundsProto())
        .setLogFormat(ReplicatedState.LOG_FORMAT_VERSION)
        .setAuthAdmin(authAdmin)
        .build();
  }

  /**
   * This configuration with the non-zero fields of {@code change} in place of its own.
   *
   * @throws IllegalArgumentException naming the first field out of range (a negative one included);
   *     nothing changes then
   */
  ReplicatedConfig with(io.idem.proto.Limits limits, SessionBounds bounds) {
    Limits l = this.limits;
    int key = pick(limits.getMaxKeyBytes(), l.maxKeyBytes());
    int value = pick(limits.getMaxValueBytes(), l.maxValueBytes());
    int name = pick(limits.getMaxNameChars(), l.maxNameChars());
    long leaseTtl = pick(limits.getMaxLeaseTtlMs(), l.maxLeaseTtlMs());
    SessionTableConfig s = this.sessions;
    int window = pick(bounds.getWindow(), s.window());
    int maxSessions = pick(bounds.getMaxSessions(), s.maxSessions());
    long maxTtl = pick(bounds.getMaxTtlMs(), s.maxTtlMs());
    int sessionName = pick(bounds.getMaxNameChars(), s.maxNameLength());
    String bad = Limits.problem(key, value, name, leaseTtl);
    bad = bad != null ? bad : Limits.outside("window", window, SessionTableConfig.MAX_WINDOW);
    bad = bad != null ? bad : Limits.outside("max_sessions", maxSessions, Integer.MAX_VALUE);
    bad =
        bad != null
            ? bad
            : Limits.outside("max_ttl_ms", maxTtl, SessionTableConfig.MAX_TTL_LIMIT_MS);
    bad =
        bad != null
            ? bad
            : Limits.outside(
                "sessions.max_name_chars", sessionName, SessionTableConfig.MAX_NAME_LENGTH_LIMIT);
    if (bad != null) {
      throw new IllegalArgumentException(bad);
    }
    return new ReplicatedConfig(
        new Limits(key, value, name, leaseTtl),
        new SessionTableConfig(window, maxSessions, maxTtl, sessionName));
  }

  private static int pick(int proposed, int current) {
    return proposed == 0 ? current : proposed;
  }

  private static long pick(long proposed, long current) {
    return proposed == 0 ? current : proposed;
  }

  io.idem.proto.Limits limitsProto() {
    return io.idem.proto.Limits.newBuilder()
        .setMaxKeyBytes(limits.maxKeyBytes())
        .setMaxValueBytes(limits.maxValueBytes())
        .setMaxNameChars(limits.maxNameChars())
        .setMaxLeaseTtlMs(limits.maxLeaseTtlMs())
        .build();
  }

  SessionBounds boundsProto() {
    return SessionBounds.newBuilder()
        .setWindow(sessions.window())
        .setMaxSessions(sessions.maxSessions())
        .setMaxTtlMs(sessions.maxTtlMs())
        .setMaxNameChars(sessions.maxNameLength())
        .build();
  }
}
