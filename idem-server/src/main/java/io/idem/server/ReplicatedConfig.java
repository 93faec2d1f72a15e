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
    return bootstrapCommand(authAdmin, io.idem.proto.Quotas.getDefaultInstance(), 0);
  }

  /**
   * {@link #bootstrapCommand(String)} that also sets the default quotas to {@code quotas}' non-zero
   * fields and, if not 0, the backend budget.
   */
  ConfigureCmd bootstrapCommand(String authAdmin, io.idem.proto.Quotas quotas, long backendBytes) {
    return ConfigureCmd.newBuilder()
        .setQuotas(quotas)
        .setBackendBytes(backendBytes)
        .setBootstrap(true)
        .setLimits(limitsProto())
        .setSessions(boundsProto())
        .setLogFormat(ReplicatedState.LOG_FORMAT_VERSION)
        .setAuthAdmin(authAdmin)
        .build();
  }

  /**
   * Checks that a bootstrap from this configuration would be applied: every value within the ranges
   * of the log format this code writes.
   *
   * @throws IllegalArgumentException naming the first value out of range
   */
  void checkBootstrap() {
    DEFAULTS.with(limitsProto(), boundsProto(), true);
  }

  /** The largest window a log format 7 configuration may set. */
  static final int CLAMPED_MAX_WINDOW = 1024;

  /** The most sessions a log format 7 configuration may allow. */
  static final int CLAMPED_MAX_SESSIONS = 1_000_000;

  /** The longest session and lease TTL a log format 7 configuration may allow: one day. */
  static final long CLAMPED_MAX_TTL_MS = 86_400_000L;

  /** {@link #with(io.idem.proto.Limits, SessionBounds, boolean)} by the ranges of format 6. */
  ReplicatedConfig with(io.idem.proto.Limits limits, SessionBounds bounds) {
    return with(limits, bounds, false);
  }

  /**
   * This configuration with the non-zero fields of {@code change} in place of its own.
   *
   * @param clamped the hard ranges of log format 7: a window of at most {@link
   *     #CLAMPED_MAX_WINDOW}, at most {@link #CLAMPED_MAX_SESSIONS} sessions, and session and lease
   *     TTLs of at most {@link #CLAMPED_MAX_TTL_MS}; older formats allowed more, and their entries
   *     are judged by their own ranges
   * @throws IllegalArgumentException naming the first field out of range (a negative one included);
   *     nothing changes then
   */
  ReplicatedConfig with(io.idem.proto.Limits limits, SessionBounds bounds, boolean clamped) {
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
    if (bad == null && clamped) {
      // Only the values this change sets: a configuration carried over from an older format stays
      // in force until changed.
      bad = clamp("max_lease_ttl_ms", limits.getMaxLeaseTtlMs(), CLAMPED_MAX_TTL_MS);
      bad = bad != null ? bad : clamp("window", bounds.getWindow(), CLAMPED_MAX_WINDOW);
      bad =
          bad != null ? bad : clamp("max_sessions", bounds.getMaxSessions(), CLAMPED_MAX_SESSIONS);
      bad = bad != null ? bad : clamp("max_ttl_ms", bounds.getMaxTtlMs(), CLAMPED_MAX_TTL_MS);
    }
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

  private static String clamp(String name, long proposed, long max) {
    return proposed == 0 ? null : Limits.outside(name, proposed, max);
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
