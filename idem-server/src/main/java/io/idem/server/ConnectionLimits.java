package io.idem.server;

/**
 * Bounds on the connections of the client port. They are node-local: each node enforces its own,
 * and nothing of them reaches the log. Zero turns a bound off.
 *
 * <p>What a client sees at each bound:
 *
 * <ul>
 *   <li>{@code maxConnectionsPerClient}: a connection past the bound is not served. Every call on
 *       it ends at once with {@code RESOURCE_EXHAUSTED} "too many connections from &lt;principal or
 *       IP&gt;: at most N (--max-connections-per-client)", and it is not counted. gRPC gives a
 *       server no supported way to close one transport, so the refused connection stays open until
 *       the idle bound closes it, {@code maxConnectionIdleMs} after its last call. The count drops
 *       as soon as a served connection closes.
 *   <li>{@code maxCallsPerConnection}: sent to the client as HTTP/2 {@code MAX_CONCURRENT_STREAMS}.
 *       A gRPC client queues the calls past it until one of its calls on that connection ends (they
 *       may meet their deadline while they wait); a client that ignores the setting gets its extra
 *       streams reset ({@code REFUSED_STREAM}).
 *   <li>{@code maxConnectionIdleMs}: a connection without calls for this long gets a GOAWAY and is
 *       closed; pings do not count as calls. A gRPC client reconnects on its next call.
 *   <li>{@code maxConnectionAgeMs}: a connection this old (within +-10%, grpc-java's jitter) gets a
 *       GOAWAY: no new calls, and the calls on it have {@code maxConnectionAgeGraceMs} to end
 *       before it is closed. A session stream never ends by itself, so it is cut at the end of the
 *       grace; the Idem client then resumes the session on a new connection and resends what was
 *       unanswered with the same sequence numbers, which the session table answers once.
 * </ul>
 *
 * @param maxConnectionsPerClient most connections served at once for one client: its certificate
 *     subject (RFC 2253) when it presented a verified certificate, else its IP address; 0: no bound
 * @param maxCallsPerConnection most calls (HTTP/2 streams) open at once on one connection; 0: no
 *     bound
 * @param maxConnectionIdleMs close a connection after this long without calls; 0: never. At least
 *     1000 otherwise (grpc-java's floor)
 * @param maxConnectionAgeMs close a connection after this long, calls or not; 0: never. At least
 *     1000 otherwise (grpc-java's floor)
 * @param maxConnectionAgeGraceMs how long calls may go on after {@code maxConnectionAgeMs} before
 *     the connection is closed under them; 0: none
 */
public record ConnectionLimits(
    int maxConnectionsPerClient,
    int maxCallsPerConnection,
    long maxConnectionIdleMs,
    long maxConnectionAgeMs,
    long maxConnectionAgeGraceMs) {

  /**
   * Default {@link #maxConnectionsPerClient()}: 256. An Idem client holds one connection per node,
   * so this is 256 client instances behind one certificate or one address, ZooKeeper's 60 per
   * address with room for a fleet that shares a certificate. Behind a proxy or NAT all clients
   * share its address: raise it there, or turn it off.
   */
  public static final int DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 256;

  /**
   * Default {@link #maxCallsPerConnection()}: 16384. Clients that share a transport multiplex every
   * session's stream on one connection per node ({@code idem bench} runs up to thousands of
   * sessions that way), and a session past the bound would wait in its client for a stream that
   * never ends. So the default sits well above the session counts seen in practice and only stops a
   * connection from holding streams without end; the number of sessions is bounded by the
   * replicated session table.
   */
  public static final int DEFAULT_MAX_CALLS_PER_CONNECTION = 16_384;

  /**
   * Default {@link #maxConnectionIdleMs()}: five minutes. A client with a live session always has
   * its session stream open, so only connections without sessions are idle (to followers, or of
   * clients that only read); reconnecting one after five quiet minutes costs a handshake, while a
   * connection that only answers pings no longer stays open forever.
   */
  public static final long DEFAULT_MAX_CONNECTION_IDLE_MS = 300_000;

  /**
   * Default {@link #maxConnectionAgeMs()}: off. The age bound exists to move clients between
   * servers behind a balancer, but an Idem client talks to the leader wherever it is; each cut
   * costs every session on the connection a resume and a resend of its unanswered requests, for no
   * gain. Turn it on (with a grace of seconds) to rotate connections, e.g. for certificate
   * rotation.
   */
  public static final long DEFAULT_MAX_CONNECTION_AGE_MS = 0;

  /**
   * Default {@link #maxConnectionAgeGraceMs()}: 30 seconds, longer than the clients' request
   * timeouts, so that unary calls in flight at the GOAWAY end normally; session streams are cut at
   * its end and resumed by the client.
   */
  public static final long DEFAULT_MAX_CONNECTION_AGE_GRACE_MS = 30_000;

  /** grpc-java raises a shorter idle or age bound to one second. */
  static final long SHORTEST_TIMED_BOUND_MS = 1000;

  /** The defaults. */
  public static final ConnectionLimits DEFAULTS =
      new ConnectionLimits(
          DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
          DEFAULT_MAX_CALLS_PER_CONNECTION,
          DEFAULT_MAX_CONNECTION_IDLE_MS,
          DEFAULT_MAX_CONNECTION_AGE_MS,
          DEFAULT_MAX_CONNECTION_AGE_GRACE_MS);

  /** No bound at all: grpc-java's own defaults. */
  public static final ConnectionLimits NONE = new ConnectionLimits(0, 0, 0, 0, 0);

  /**
   * Validates every bound.
   *
   * @throws IllegalArgumentException naming the first bad value and its flag
   */
  public ConnectionLimits {
    notNegative("--max-connections-per-client", maxConnectionsPerClient);
    notNegative("--max-calls-per-connection", maxCallsPerConnection);
    timed("--max-connection-idle-ms", maxConnectionIdleMs);
    timed("--max-connection-age-ms", maxConnectionAgeMs);
    notNegative("--max-connection-age-grace-ms", maxConnectionAgeGraceMs);
  }

  /** These limits with {@link #maxConnectionsPerClient()} set to {@code n}. */
  public ConnectionLimits withMaxConnectionsPerClient(int n) {
    return new ConnectionLimits(
        n, maxCallsPerConnection, maxConnectionIdleMs, maxConnectionAgeMs, maxConnectionAgeGraceMs);
  }

  /** These limits with {@link #maxCallsPerConnection()} set to {@code n}. */
  public ConnectionLimits withMaxCallsPerConnection(int n) {
    return new ConnectionLimits(
        maxConnectionsPerClient,
        n,
        maxConnectionIdleMs,
        maxConnectionAgeMs,
        maxConnectionAgeGraceMs);
  }

  /** These limits with {@link #maxConnectionIdleMs()} set to {@code ms}. */
  public ConnectionLimits withMaxConnectionIdleMs(long ms) {
    return new ConnectionLimits(
        maxConnectionsPerClient,
        maxCallsPerConnection,
        ms,
        maxConnectionAgeMs,
        maxConnectionAgeGraceMs);
  }

  /** These limits with the age bound and its grace set. */
  public ConnectionLimits withMaxConnectionAgeMs(long ageMs, long graceMs) {
    return new ConnectionLimits(
        maxConnectionsPerClient, maxCallsPerConnection, maxConnectionIdleMs, ageMs, graceMs);
  }

  private static void notNegative(String flag, long v) {
    if (v < 0) {
      throw new IllegalArgumentException(flag + " must be 0 (no bound) or positive, got " + v);
    }
  }

  private static void timed(String flag, long ms) {
    if (ms != 0 && ms < SHORTEST_TIMED_BOUND_MS) {
      throw new IllegalArgumentException(
          flag + " must be 0 (no bound) or at least " + SHORTEST_TIMED_BOUND_MS + ", got " + ms);
    }
  }
}
