package io.idem.server;

import io.idem.core.SessionTableConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A node's configuration. Immutable; build with {@link #builder()}. The defaults make a single node
 * storing in {@code ./idem-data}, serving clients on 127.0.0.1:7001 and Raft on 127.0.0.1:7002.
 *
 * @param id this node's id; must be one of {@code peers}
 * @param dataDir where Raft keeps its log and snapshots
 * @param peers every member of the cluster, this node included
 * @param sessions the session table's bounds (window, max sessions, TTL and name limits)
 * @param limits key, value and lease limits
 * @param tickIntervalMs how often an idle leader appends a tick so that expiry goes on
 * @param electionTimeoutMinMs lower bound of the randomised election timeout
 * @param electionTimeoutMaxMs upper bound of the randomised election timeout
 * @param maxBatchCommands most commands the leader folds into one log entry
 * @param maxBatchBytes most bytes of commands in one log entry
 * @param maxInFlightBatches entries being replicated at once; later commands wait and batch
 * @param maxQueuedCommands commands waiting on the leader before new ones get OVERLOADED
 * @param maxQueuedBytes bytes of commands waiting on the leader before new ones get OVERLOADED (a
 *     command into an empty queue is taken whatever its size)
 * @param streamMaxOwedAnswers answers one session stream may owe (commands not answered yet, and
 *     answers not written to the client yet) and still read another request; at the bound it reads
 *     none until answers leave, and HTTP/2 flow control holds the client's further requests. At
 *     least {@link SessionTableConfig#MAX_WINDOW}, so that a client keeping its window full is
 *     never held back ({@link Outbox})
 * @param streamMaxOwedBytes bytes of answers one session stream may owe and still read another
 *     request (answers not written by their size, commands not answered as large as the stream's
 *     largest answer); at the bound it reads none until answers leave
 * @param streamStallTimeoutMs how long a session stream's answers may wait for a client that reads
 *     none of them; then the stream ends with {@code RESOURCE_EXHAUSTED}, and the client, which
 *     resends on a new stream, gets the answers saved in its session
 * @param snapshotEveryEntries take a snapshot after this many applied entries
 * @param snapshotsRetained how many snapshot files to keep
 * @param logSegmentBytes size of a Raft log segment; only closed segments are purged behind a
 *     snapshot
 * @param clientListen host:port the client endpoint binds, when it differs from the client address
 *     the peer list advertises (a proxy or a NAT in front of the node); empty: the advertised one
 * @param tls the node's TLS files, for clients and peers; null: plaintext (loopback or a trusted
 *     network only)
 * @param peerTls the TLS files of the Raft port, when peers have a CA of their own: the node's
 *     certificate and key that its peers trust, and the CA that signs only peer certificates; null:
 *     {@code tls}. Needs {@code tls}.
 * @param peerSubjects the certificate subjects (RFC 2253) of the cluster's members: the Raft port
 *     refuses any other caller ({@link PeerGate}). With TLS, either this is not empty or {@code
 *     peerTls} has a CA other than {@code tls}'s, so that a client certificate is never taken for a
 *     peer's. Empty without TLS.
 * @param authAdmin the principal (a client certificate's subject, RFC 2253) that a new cluster's
 *     bootstrap makes admin, turning access control on ({@link AuthState}); it matters only at the
 *     first start, after which the replicated state decides. Required with TLS unless {@code
 *     authOff}; refused without TLS (no caller would have a principal).
 * @param authOff with TLS, bootstrap a cluster without access control: every client may do anything
 * @param adminAddress host:port of the admin HTTP endpoint ({@code /metrics}, the status page);
 *     empty: none. Port 0 picks a free port ({@link IdemServer#adminPort}). With TLS it serves
 *     HTTPS and requires client certificates; without TLS it must be a loopback address.
 * @param join the node joins an existing cluster as a new member: it starts with no members,
 *     neither votes nor campaigns, and waits for a membership change that adds it ({@code idem
 *     member add}); {@code peers} then holds only this node. With several groups it hosts every
 *     group, a member of none, and each group adds it on its own ({@code idem group move}). Ignored
 *     once its data directory holds a Raft configuration (a restart), which then names the members.
 * @param connectionLimits bounds on the client port's connections (per client, calls per
 *     connection, idle time, age); node-local
 * @param bootstrapQuotas the default quotas a new cluster's bootstrap sets (fields left 0: the
 *     code's defaults, {@code Quotas.DEFAULTS}); replicated from then on
 * @param bootstrapBackendBytes the backend budget a new cluster's bootstrap sets; 0: the code's
 *     default ({@link QuotaState#DEFAULT_BACKEND_BYTES})
 * @param groups the number of data groups (Raft groups the keyspace's partitions are spread over; 1
 *     to {@link io.idem.proto.Partitions#MAX_GROUPS}). 1: a cluster of one group, as before groups
 *     existed. Above 1, every node also hosts the metadata group. Fixed when the cluster is
 *     created: a data directory made with another number is refused at start.
 */
public record ServerConfig(
    String id,
    Path dataDir,
    List<Peer> peers,
    SessionTableConfig sessions,
    Limits limits,
    long tickIntervalMs,
    long electionTimeoutMinMs,
    long electionTimeoutMaxMs,
    int maxBatchCommands,
    int maxBatchBytes,
    int maxInFlightBatches,
    int maxQueuedCommands,
    long maxQueuedBytes,
    int streamMaxOwedAnswers,
    long streamMaxOwedBytes,
    long streamStallTimeoutMs,
    long snapshotEveryEntries,
    int snapshotsRetained,
    long logSegmentBytes,
    String clientListen,
    TlsFiles tls,
    TlsFiles peerTls,
    List<String> peerSubjects,
    String authAdmin,
    boolean authOff,
    String adminAddress,
    boolean join,
    ConnectionLimits connectionLimits,
    io.idem.proto.Quotas bootstrapQuotas,
    long bootstrapBackendBytes,
    int groups) {

  /** Default client address. */
  public static final String DEFAULT_CLIENT_ADDRESS = "127.0.0.1:7001";

  /** Default Raft address. */
  public static final String DEFAULT_RAFT_ADDRESS = "127.0.0.1:7002";

  /** Default {@link #maxQueuedCommands}. */
  public static final int DEFAULT_MAX_QUEUED_COMMANDS = 100_000;

  /** Default {@link #maxQueuedBytes}: 128 MiB. */
  public static final long DEFAULT_MAX_QUEUED_BYTES = 128L << 20;

  /**
   * Default {@link #streamMaxOwedAnswers}: twice the largest session window, room for a full window
   * and its keep-alives.
   */
  public static final int DEFAULT_STREAM_MAX_OWED_ANSWERS = 2 * SessionTableConfig.MAX_WINDOW;

  /** Default {@link #streamMaxOwedBytes}: 64 MiB. */
  public static final long DEFAULT_STREAM_MAX_OWED_BYTES = 64L << 20;

  /** Default {@link #streamStallTimeoutMs}: 30 s. */
  public static final long DEFAULT_STREAM_STALL_TIMEOUT_MS = 30_000;

  /**
   * One cluster member.
   *
   * @param id its id
   * @param raftAddress host:port of its Raft (peer-to-peer) endpoint
   * @param clientAddress host:port of its client endpoint
   */
  public record Peer(String id, String raftAddress, String clientAddress) {
    /** Validates the fields. */
    public Peer {
      if (id == null || !id.matches("[A-Za-z0-9_-]{1,64}")) {
        throw new IllegalArgumentException(
            "peer id must be 1-64 letters, digits, '_' or '-', got \"" + id + "\"");
      }
      checkAddress("raft address of " + id, raftAddress);
      checkAddress("client address of " + id, clientAddress);
    }

    /**
     * Parses {@code id=host:raftPort:clientPort}, for example {@code n1=127.0.0.1:7002:7001}.
     *
     * @throws IllegalArgumentException naming what is wrong
     */
    public static Peer parse(String spec) {
      int eq = spec.indexOf('=');
      String[] hp = eq < 0 ? new String[0] : spec.substring(eq + 1).split(":");
      if (eq < 0 || hp.length != 3) {
        throw new IllegalArgumentException(
            "peer must look like id=host:raftPort:clientPort, got \"" + spec + "\"");
      }
      return new Peer(spec.substring(0, eq), hp[0] + ":" + hp[1], hp[0] + ":" + hp[2]);
    }
  }

  /** Validates the configuration and names the first bad value. */
  public ServerConfig {
    peers = List.copyOf(peers);
    if (peers.isEmpty()) {
      throw new IllegalArgumentException("peers must not be empty");
    }
    if (peers.stream().map(Peer::id).distinct().count() != peers.size()) {
      throw new IllegalArgumentException("peer ids must be distinct: " + peers);
    }
    if (join && peers.size() != 1) {
      throw new IllegalArgumentException(
          "a joining node lists only itself as a peer (the cluster adds it), got " + peers);
    }
    if (peers.stream().noneMatch(p -> p.id().equals(id))) {
      throw new IllegalArgumentException("node id \"" + id + "\" is not among the peers " + peers);
    }
    if (groups < 1 || groups > io.idem.proto.Partitions.MAX_GROUPS) {
      throw new IllegalArgumentException(
          "groups must be in [1, " + io.idem.proto.Partitions.MAX_GROUPS + "], got " + groups);
    }
    positive("tickIntervalMs", tickIntervalMs);
    positive("electionTimeoutMinMs", electionTimeoutMinMs);
    if (electionTimeoutMaxMs <= electionTimeoutMinMs) {
      throw new IllegalArgumentException(
          "electionTimeoutMaxMs must exceed electionTimeoutMinMs, got "
              + electionTimeoutMaxMs
              + " <= "
              + electionTimeoutMinMs);
    }
    if (maxBatchCommands < 1 || maxBatchCommands > ReplicatedState.MAX_COMMANDS_PER_ENTRY) {
      throw new IllegalArgumentException(
          "maxBatchCommands must be in [1, "
              + ReplicatedState.MAX_COMMANDS_PER_ENTRY
              + "], got "
              + maxBatchCommands);
    }
    positive("maxBatchBytes", maxBatchBytes);
    positive("maxInFlightBatches", maxInFlightBatches);
    positive("maxQueuedCommands", maxQueuedCommands);
    positive("maxQueuedBytes", maxQueuedBytes);
    new Outbox.Bounds(streamMaxOwedAnswers, streamMaxOwedBytes, streamStallTimeoutMs);
    positive("snapshotEveryEntries", snapshotEveryEntries);
    positive("snapshotsRetained", snapshotsRetained);
    if (logSegmentBytes < 4096) {
      throw new IllegalArgumentException(
          "logSegmentBytes must be at least 4096, got " + logSegmentBytes);
    }
    clientListen = clientListen == null ? "" : clientListen;
    if (!clientListen.isEmpty()) {
      checkAddress("client listen address", clientListen);
    }
    peerSubjects = peerSubjects == null ? List.of() : List.copyOf(peerSubjects);
    checkPeerTls(tls, peerTls, peerSubjects);
    authAdmin = authAdmin == null ? "" : authAdmin.trim();
    if (tls == null && !authAdmin.isEmpty()) {
      throw new IllegalArgumentException(
          "--auth-admin needs TLS: principals are client certificates' subjects");
    }
    if (tls != null && authAdmin.isEmpty() && !authOff) {
      throw new IllegalArgumentException(
          "with TLS, access control is on: name the first admin's certificate subject"
              + " (--auth-admin 'CN=admin,O=Example'), or run without it (--no-auth)");
    }
    if (!authAdmin.isEmpty()) {
      PeerGate.subject(authAdmin);
    }
    connectionLimits = connectionLimits == null ? ConnectionLimits.DEFAULTS : connectionLimits;
    bootstrapQuotas =
        bootstrapQuotas == null ? io.idem.proto.Quotas.getDefaultInstance() : bootstrapQuotas;
    adminAddress = adminAddress == null ? "" : adminAddress;
    if (!adminAddress.isEmpty()) {
      checkAddress("admin address", adminAddress);
      if (tls == null && !loopback(adminAddress)) {
        throw new IllegalArgumentException(
            "the admin address "
                + adminAddress
                + " is not a loopback address: without TLS the admin port cannot tell who asks,"
                + " and it lists sessions; bind it to 127.0.0.1, or give the node TLS files");
      }
    }
  }

  /**
   * Checks that the Raft port can tell peers from clients: without TLS it cannot (and takes no peer
   * list); with TLS, peers have their own CA or are named.
   */
  private static void checkPeerTls(TlsFiles tls, TlsFiles peerTls, List<String> peerSubjects) {
    if (tls == null) {
      if (peerTls != null || !peerSubjects.isEmpty()) {
        throw new IllegalArgumentException(
            "peer TLS files and peer certificate subjects need the node's TLS files too");
      }
      return;
    }
    peerSubjects.forEach(PeerGate::subject);
    TlsFiles peers = peerTls == null ? tls : peerTls;
    if (peerSubjects.isEmpty()
        && sameFile(peers.trustedCertificates(), tls.trustedCertificates())) {
      throw new IllegalArgumentException(
          "with TLS the Raft port must tell the cluster's members from clients, whose"
              + " certificates the same CA signs: name the members' certificate subjects"
              + " (--peer-allow) or give peers a CA of their own (--peer-tls-ca with"
              + " --peer-tls-cert and --peer-tls-key)");
    }
  }

  /** Whether two files hold the same bytes. */
  private static boolean sameFile(Path a, Path b) {
    try {
      return java.nio.file.Files.mismatch(a, b) == -1;
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("cannot compare " + a + " with " + b + ": " + e, e);
    }
  }

  /** Whether {@code hostPort}'s host is a loopback address (127.0.0.0/8, ::1, localhost). */
  private static boolean loopback(String hostPort) {
    String host = hostPort.substring(0, hostPort.lastIndexOf(':'));
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    try {
      return java.net.InetAddress.getByName(host).isLoopbackAddress();
    } catch (java.net.UnknownHostException e) {
      return false;
    }
  }

  /** The TLS files of the Raft port: {@link #peerTls}, else {@link #tls} (null: plaintext). */
  public TlsFiles raftTls() {
    return peerTls == null ? tls : peerTls;
  }

  /** The bounds of every session stream's outbox. */
  Outbox.Bounds streamBounds() {
    return new Outbox.Bounds(streamMaxOwedAnswers, streamMaxOwedBytes, streamStallTimeoutMs);
  }

  /** The address the client endpoint binds: {@link #clientListen}, else the advertised one. */
  public String clientListenAddress() {
    return clientListen.isEmpty() ? self().clientAddress() : clientListen;
  }

  /** This node's own peer entry. */
  public Peer self() {
    return peers.stream().filter(p -> p.id().equals(id)).findFirst().orElseThrow();
  }

  /** A builder starting from the single-node defaults. */
  public static Builder builder() {
    return new Builder();
  }

  private static void positive(String name, long v) {
    if (v < 1) {
      throw new IllegalArgumentException(name + " must be positive, got " + v);
    }
  }

  static void checkAddress(String what, String address) {
    int colon = address == null ? -1 : address.lastIndexOf(':');
    boolean ok = colon > 0;
    if (ok) {
      try {
        int port = Integer.parseInt(address.substring(colon + 1));
        ok = port >= 0 && port <= 65535;
      } catch (NumberFormatException e) {
        ok = false;
      }
    }
    if (!ok) {
      throw new IllegalArgumentException(what + " must be host:port, got \"" + address + "\"");
    }
  }

  /** Builds a {@link ServerConfig}. Not thread-safe. */
  public static final class Builder {
    private String id = "n1";
    private Path dataDir = Path.of("idem-data");
    private List<Peer> peers =
        new ArrayList<>(List.of(new Peer("n1", DEFAULT_RAFT_ADDRESS, DEFAULT_CLIENT_ADDRESS)));
    private SessionTableConfig sessions = SessionTableConfig.defaults();
    private Limits limits = Limits.DEFAULTS;
    private long tickIntervalMs = 500;
    private long electionTimeoutMinMs = 300;
    private long electionTimeoutMaxMs = 600;
    private int maxBatchCommands = 4096;
    private int maxBatchBytes = 1 << 20;
    private int maxInFlightBatches = 1;
    private int maxQueuedCommands = DEFAULT_MAX_QUEUED_COMMANDS;
    private long maxQueuedBytes = DEFAULT_MAX_QUEUED_BYTES;
    private int streamMaxOwedAnswers = DEFAULT_STREAM_MAX_OWED_ANSWERS;
    private long streamMaxOwedBytes = DEFAULT_STREAM_MAX_OWED_BYTES;
    private long streamStallTimeoutMs = DEFAULT_STREAM_STALL_TIMEOUT_MS;
    private long snapshotEveryEntries = 10_000;
    private int snapshotsRetained = 2;
    private long logSegmentBytes = 8L << 20;
    private String clientListen = "";
    private String adminAddress = "";
    private TlsFiles tls;
    private TlsFiles peerTls;
    private List<String> peerSubjects = List.of();
    private String authAdmin = "";
    private boolean authOff;
    private boolean join;
    private ConnectionLimits connectionLimits = ConnectionLimits.DEFAULTS;
    private io.idem.proto.Quotas bootstrapQuotas = io.idem.proto.Quotas.getDefaultInstance();
    private long bootstrapBackendBytes;
    private int groups = 1;

    /** The number of data groups of a new cluster (see {@link ServerConfig#groups}). */
    public Builder groups(int groups) {
      this.groups = groups;
      return this;
    }

    /**
     * The default quotas a new cluster's bootstrap sets (fields left 0: the code's defaults); no
     * effect on a cluster already configured (change those with {@code idem config set}).
     */
    public Builder bootstrapQuotas(io.idem.proto.Quotas quotas) {
      this.bootstrapQuotas = quotas;
      return this;
    }

    /** The backend budget a new cluster's bootstrap sets; 0: the code's default. */
    public Builder bootstrapBackendBytes(long bytes) {
      this.bootstrapBackendBytes = bytes;
      return this;
    }

    private Builder() {}

    /** The client port's connection bounds (see {@link ConnectionLimits}). */
    public Builder connectionLimits(ConnectionLimits limits) {
      this.connectionLimits = limits;
      return this;
    }

    /** Whether the node joins an existing cluster as a new member (see {@link #join}). */
    public Builder join(boolean join) {
      this.join = join;
      return this;
    }

    public Builder id(String id) {
      this.id = id;
      return this;
    }

    public Builder dataDir(Path dataDir) {
      this.dataDir = dataDir;
      return this;
    }

    public Builder peers(List<Peer> peers) {
      this.peers = new ArrayList<>(peers);
      return this;
    }

    public Builder sessions(SessionTableConfig sessions) {
      this.sessions = sessions;
      return this;
    }

    public Builder limits(Limits limits) {
      this.limits = limits;
      return this;
    }

    public Builder tickIntervalMs(long ms) {
      this.tickIntervalMs = ms;
      return this;
    }

    public Builder electionTimeoutMs(long minMs, long maxMs) {
      this.electionTimeoutMinMs = minMs;
      this.electionTimeoutMaxMs = maxMs;
      return this;
    }

    public Builder maxBatchCommands(int n) {
      this.maxBatchCommands = n;
      return this;
    }

    public Builder maxBatchBytes(int n) {
      this.maxBatchBytes = n;
      return this;
    }

    public Builder maxInFlightBatches(int n) {
      this.maxInFlightBatches = n;
      return this;
    }

    public Builder maxQueuedCommands(int n) {
      this.maxQueuedCommands = n;
      return this;
    }

    /** See {@link ServerConfig#maxQueuedBytes}. */
    public Builder maxQueuedBytes(long n) {
      this.maxQueuedBytes = n;
      return this;
    }

    /** See {@link ServerConfig#streamMaxOwedAnswers}. */
    public Builder streamMaxOwedAnswers(int n) {
      this.streamMaxOwedAnswers = n;
      return this;
    }

    /** See {@link ServerConfig#streamMaxOwedBytes}. */
    public Builder streamMaxOwedBytes(long n) {
      this.streamMaxOwedBytes = n;
      return this;
    }

    /** See {@link ServerConfig#streamStallTimeoutMs}. */
    public Builder streamStallTimeoutMs(long ms) {
      this.streamStallTimeoutMs = ms;
      return this;
    }

    public Builder snapshotEveryEntries(long n) {
      this.snapshotEveryEntries = n;
      return this;
    }

    public Builder snapshotsRetained(int n) {
      this.snapshotsRetained = n;
      return this;
    }

    public Builder logSegmentBytes(long n) {
      this.logSegmentBytes = n;
      return this;
    }

    public Builder clientListen(String hostPort) {
      this.clientListen = hostPort;
      return this;
    }

    public Builder tls(TlsFiles tls) {
      this.tls = tls;
      return this;
    }

    /** The Raft port's own TLS files, with a CA that signs only peers (see {@link #peerTls}). */
    public Builder peerTls(TlsFiles peerTls) {
      this.peerTls = peerTls;
      return this;
    }

    /** The members' certificate subjects (see {@link ServerConfig#peerSubjects}). */
    public Builder peerSubjects(List<String> subjects) {
      this.peerSubjects = List.copyOf(subjects);
      return this;
    }

    /** The principal a new cluster's bootstrap makes admin (see {@link ServerConfig#authAdmin}). */
    public Builder authAdmin(String principal) {
      this.authAdmin = principal;
      return this;
    }

    /** With TLS, bootstrap without access control (see {@link ServerConfig#authOff}). */
    public Builder authOff(boolean off) {
      this.authOff = off;
      return this;
    }

    public Builder adminAddress(String hostPort) {
      this.adminAddress = hostPort;
      return this;
    }

    /**
     * Returns the configuration.
     *
     * @throws IllegalArgumentException naming the first bad value
     */
    public ServerConfig build() {
      // The bootstrap command carries these, and a leader writing log format 7 holds them to its
      // ranges: refuse here what would leave the cluster unconfigured.
      new ReplicatedConfig(limits, sessions).checkBootstrap();
      String badQuota = QuotaState.problem(bootstrapQuotas, bootstrapBackendBytes);
      if (badQuota != null) {
        throw new IllegalArgumentException(badQuota);
      }
      return new ServerConfig(
          id,
          dataDir,
          peers,
          sessions,
          limits,
          tickIntervalMs,
          electionTimeoutMinMs,
          electionTimeoutMaxMs,
          maxBatchCommands,
          maxBatchBytes,
          maxInFlightBatches,
          maxQueuedCommands,
          maxQueuedBytes,
          streamMaxOwedAnswers,
          streamMaxOwedBytes,
          streamStallTimeoutMs,
          snapshotEveryEntries,
          snapshotsRetained,
          logSegmentBytes,
          clientListen,
          tls,
          peerTls,
          peerSubjects,
          authAdmin,
          authOff,
          adminAddress,
          join,
          connectionLimits,
          bootstrapQuotas,
          bootstrapBackendBytes,
          groups);
    }
  }
}
