package io.idem.core;

/**
 * The bounds of a {@link SessionTable}. Immutable; build one with {@link #builder()}.
 *
 * <p>Every bound changes admission decisions, so every replica must use the same values. They are
 * therefore part of the table's replicated state: a snapshot carries them and {@link
 * SessionTable#readSnapshot} restores them.
 *
 * @param window the most responses a session may hold unacknowledged ({@code nextSeq - lowWater});
 *     the next new command is refused with {@link RejectCode#WINDOW_EXCEEDED}
 * @param maxSessions the most live sessions; a registration beyond it is refused with {@link
 *     RejectCode#TOO_MANY_SESSIONS}
 * @param maxTtlMs the longest session TTL a client may ask for, in milliseconds
 * @param maxNameLength the longest durable name, in characters
 */
public record SessionTableConfig(int window, int maxSessions, long maxTtlMs, int maxNameLength) {

  /** Default {@link #window()}: 128 outstanding requests per session. */
  public static final int DEFAULT_WINDOW = 128;

  /** Default {@link #maxSessions()}: one million. */
  public static final int DEFAULT_MAX_SESSIONS = 1_000_000;

  /** Default {@link #maxTtlMs()}: one day. */
  public static final long DEFAULT_MAX_TTL_MS = 86_400_000L;

  /** Default {@link #maxNameLength()}: 256 characters. */
  public static final int DEFAULT_MAX_NAME_LENGTH = 256;

  /** Upper limit of {@link #window()}, so that a snapshot's response count stays bounded. */
  public static final int MAX_WINDOW = 1 << 16;

  /** Upper limit of {@link #maxTtlMs()}: about 35 years, far from overflowing {@code now + ttl}. */
  public static final long MAX_TTL_LIMIT_MS = 1L << 40;

  /** Upper limit of {@link #maxNameLength()}. */
  public static final int MAX_NAME_LENGTH_LIMIT = 4096;

  /** Validates every bound and names the bad value. */
  public SessionTableConfig {
    requireRange("window", window, 1, MAX_WINDOW);
    requireRange("maxSessions", maxSessions, 1, Integer.MAX_VALUE);
    requireRange("maxTtlMs", maxTtlMs, 1, MAX_TTL_LIMIT_MS);
    requireRange("maxNameLength", maxNameLength, 1, MAX_NAME_LENGTH_LIMIT);
  }

  /** The defaults above. */
  public static SessionTableConfig defaults() {
    return builder().build();
  }

  /** A builder starting from the defaults. */
  public static Builder builder() {
    return new Builder();
  }

  private static void requireRange(String name, long value, long min, long max) {
    if (value < min || value > max) {
      throw new IllegalArgumentException(
          name + " must be in [" + min + ", " + max + "], got " + value);
    }
  }

  /** Builds a {@link SessionTableConfig}. Not thread-safe; validation happens in {@link #build}. */
  public static final class Builder {
    private int window = DEFAULT_WINDOW;
    private int maxSessions = DEFAULT_MAX_SESSIONS;
    private long maxTtlMs = DEFAULT_MAX_TTL_MS;
    private int maxNameLength = DEFAULT_MAX_NAME_LENGTH;

    private Builder() {}

    /** See {@link SessionTableConfig#window()}. */
    public Builder window(int window) {
      this.window = window;
      return this;
    }

    /** See {@link SessionTableConfig#maxSessions()}. */
    public Builder maxSessions(int maxSessions) {
      this.maxSessions = maxSessions;
      return this;
    }

    /** See {@link SessionTableConfig#maxTtlMs()}. */
    public Builder maxTtlMs(long maxTtlMs) {
      this.maxTtlMs = maxTtlMs;
      return this;
    }

    /** See {@link SessionTableConfig#maxNameLength()}. */
    public Builder maxNameLength(int maxNameLength) {
      this.maxNameLength = maxNameLength;
      return this;
    }

    /**
     * Returns the config.
     *
     * @throws IllegalArgumentException naming the first bound out of range
     */
    public SessionTableConfig build() {
      return new SessionTableConfig(window, maxSessions, maxTtlMs, maxNameLength);
    }
  }
}
