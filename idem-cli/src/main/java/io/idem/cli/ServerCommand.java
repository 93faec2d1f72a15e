package io.idem.cli;

import io.idem.server.ConnectionLimits;
import io.idem.server.IdemServer;
import io.idem.server.QuotaFlags;
import io.idem.server.ServerConfig;
import io.idem.server.TlsFiles;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code idem server}: runs one Idem node until it is stopped (Ctrl-C or SIGTERM). With no flags: a
 * single node storing in {@code ./idem-data}, clients on 127.0.0.1:7001, Raft on 127.0.0.1:7002.
 *
 * <p>Every flag can also come from the environment ({@code IDEM_} and the flag's name in upper
 * snake case: {@code --data-dir} is {@code IDEM_DATA_DIR}) or from a configuration file (the flag's
 * name without its dashes as the key: {@code data-dir = /var/lib/idem}); a flag wins over the
 * environment, which wins over the file ({@link ServerDefaults}).
 */
@Command(
    name = "server",
    mixinStandardHelpOptions = true,
    version = "idem-server 0.1.0",
    defaultValueProvider = ServerDefaults.class,
    description = "Runs one node of an Idem cluster (exactly-once KV store with leases).")
public final class ServerCommand implements Callable<Integer> {

  /** Starts a node from its configuration: {@link IdemServer#start}, or the lab's own. */
  @FunctionalInterface
  public interface Starter {
    /** Starts the node that {@code config} describes. */
    IdemServer start(ServerConfig config) throws IOException;
  }

  private final Starter starter;

  @CommandLine.Spec CommandLine.Model.CommandSpec spec;

  /** The environment the flags' defaults come from; tests give their own. */
  Map<String, String> environment = System.getenv();

  /** A server command that starts nodes with {@link IdemServer#start}. */
  public ServerCommand() {
    this(IdemServer::start);
  }

  /** A server command that starts nodes with {@code starter}. */
  public ServerCommand(Starter starter) {
    this.starter = starter;
  }

  @Option(
      names = "--config",
      paramLabel = "<file>",
      description =
          "The configuration file: one key per flag, the flag's name without its dashes"
              + " (data-dir = /var/lib/idem). A flag given on the command line or in the"
              + " environment (IDEM_DATA_DIR) wins over the file. Default: $IDEM_CONFIG, else"
              + " conf/idem.conf of the installation when it exists.")
  Path config;

  @Option(
      names = "--id",
      defaultValue = "n1",
      description = "This node's id; must be one of --peers. Default: ${DEFAULT-VALUE}.")
  String id;

  @Option(
      names = "--data-dir",
      defaultValue = "idem-data",
      description = "Where the node keeps its Raft log and snapshots. Default: ${DEFAULT-VALUE}.")
  Path dataDir;

  @Option(
      names = "--client-address",
      defaultValue = "" + ServerConfig.DEFAULT_CLIENT_ADDRESS,
      description =
          "host:port for clients (single node only; with --peers it comes from the peer list). Default: ${DEFAULT-VALUE}.")
  String clientAddress;

  @Option(
      names = "--client-listen",
      defaultValue = "",
      description =
          "host:port the client endpoint binds, when clients reach the node through another address"
              + " (a proxy, a NAT): the peer list then holds the address clients use. Default: the"
              + " client address.")
  String clientListen;

  @Option(
      names = "--admin-address",
      defaultValue = "",
      description =
          "host:port of the admin HTTP endpoint: Prometheus metrics at /metrics, the status page at"
              + " /. Default: none.")
  String adminAddress;

  @Option(
      names = "--tls-cert",
      defaultValue = "",
      description =
          "PEM certificate chain of this node: clients and peers then reach it over TLS (with"
              + " --tls-key and --tls-ca). Default: plaintext.")
  String tlsCert;

  @Option(
      names = "--tls-key",
      defaultValue = "",
      description = "PEM private key (PKCS#8, unencrypted) of --tls-cert.")
  String tlsKey;

  @Option(
      names = "--tls-ca",
      defaultValue = "",
      description =
          "PEM CA certificates this node trusts: peers authenticate each other with them (mutual"
              + " TLS), and clients with --tls-require-client-cert.")
  String tlsCa;

  @Option(
      names = "--tls-require-client-cert",
      description =
          "Clients must present a certificate the --tls-ca signed. Default: not required.")
  boolean tlsRequireClientCert;

  @Option(
      names = "--peer-tls-cert",
      defaultValue = "",
      description =
          "PEM certificate chain this node presents to its peers on the Raft port, when peers have"
              + " a CA of their own (with --peer-tls-key and --peer-tls-ca). Default: --tls-cert.")
  String peerTlsCert;

  @Option(
      names = "--peer-tls-key",
      defaultValue = "",
      description = "PEM private key (PKCS#8, unencrypted) of --peer-tls-cert.")
  String peerTlsKey;

  @Option(
      names = "--peer-tls-ca",
      defaultValue = "",
      description =
          "PEM CA certificates that sign the peers' certificates and no client's: the Raft port"
              + " trusts only these. Default: --tls-ca, which then needs --peer-allow.")
  String peerTlsCa;

  @Option(
      names = "--peer-allow",
      split = ";",
      defaultValue = "",
      description =
          "The members' certificate subjects (RFC 2253, e.g. CN=n1,O=Idem), separated by ';' or"
              + " given once each: the Raft port refuses every other certificate. With TLS, needed"
              + " unless --peer-tls-ca names a CA of the peers' own.")
  List<String> peerAllow = new ArrayList<>();

  @Option(
      names = "--auth-admin",
      defaultValue = "",
      description =
          "With TLS: the certificate subject (RFC 2253) of the first admin, whom a new cluster's"
              + " bootstrap gives the role admin, turning access control on (docs/SECURITY.md)."
              + " Matters at the first start only.")
  String authAdmin;

  @Option(
      names = "--no-auth",
      description =
          "With TLS: bootstrap a new cluster without access control; every client whose"
              + " certificate the CA signed may do anything, including reconfigure the cluster.")
  boolean noAuth;

  @Option(
      names = "--quota",
      split = ",",
      description =
          "A default quota of every principal that a new cluster's bootstrap sets, e.g. --quota"
              + " key_records=500000 --quota kv_bytes=1GiB (sessions, saved_bytes, key_records,"
              + " key_bytes, kv_keys, kv_bytes, leases, list_length; docs/LIMITS.md). Matters at"
              + " the first start only: then idem config set --quota.")
  Map<String, String> quotas = new LinkedHashMap<>();

  @Option(
      names = "--backend-bytes",
      defaultValue = "0",
      description =
          "The backend budget a new cluster's bootstrap sets, e.g. 2GiB: past this estimated"
              + " size of the replicated state, writes that grow it get NO_SPACE. 0: the default"
              + " (1 GiB). Matters at the first start only: then idem config set --backend-bytes.")
  String backendBytes;

  @Option(
      names = "--raft-address",
      defaultValue = "" + ServerConfig.DEFAULT_RAFT_ADDRESS,
      description =
          "host:port for Raft between nodes (single node only). Default: ${DEFAULT-VALUE}.")
  String raftAddress;

  @Option(
      names = "--peers",
      defaultValue = "",
      description =
          "Every member, comma-separated, as id=host:raftPort:clientPort, for example"
              + " n1=127.0.0.1:7002:7001,n2=127.0.0.1:7012:7011,n3=127.0.0.1:7022:7021.")
  String peers;

  @Option(
      names = "--join",
      description =
          "Join an existing cluster as a new member: start with no members, never vote or"
              + " campaign, and wait until `idem member add` adds this node (with --id,"
              + " --raft-address and --client-address, not --peers). A node that lost its disk"
              + " joins this way under a new id (docs/OPERATIONS.md). After the first start the"
              + " data directory names the members, with or without this flag.")
  boolean join;

  @Option(
      names = "--tick-ms",
      defaultValue = "500",
      description = "How often an idle leader advances log time. Default: ${DEFAULT-VALUE}.")
  long tickMs;

  @Option(
      names = "--snapshot-every",
      defaultValue = "10000",
      description = "Snapshot after this many log entries. Default: ${DEFAULT-VALUE}.")
  long snapshotEvery;

  @Option(
      names = "--groups",
      defaultValue = "1",
      description =
          "Data groups: Raft groups the keyspace's 64 partitions are spread over, each with its own"
              + " log, snapshots and leader; above 1 every node also hosts the metadata group."
              + " Set when the cluster is created, the same on every node; a data directory made"
              + " with another number is refused. Default: ${DEFAULT-VALUE}.")
  int groups;

  @Option(
      names = "--entries-in-flight",
      defaultValue = "1",
      description =
          "Log entries the leader replicates at once; commands arriving meanwhile wait and share the"
              + " next entry. Default: ${DEFAULT-VALUE}.")
  int entriesInFlight;

  @Option(
      names = "--max-queued-commands",
      defaultValue = "" + ServerConfig.DEFAULT_MAX_QUEUED_COMMANDS,
      description =
          "Commands the leader holds waiting for a log entry; a command past it is answered"
              + " OVERLOADED (the client backs off and resends). Default: ${DEFAULT-VALUE}.")
  int maxQueuedCommands;

  @Option(
      names = "--max-queued-bytes",
      defaultValue = "" + ServerConfig.DEFAULT_MAX_QUEUED_BYTES,
      description =
          "Bytes of commands the leader holds waiting for a log entry; a command past it is"
              + " answered OVERLOADED (one into an empty queue is taken whatever its size)."
              + " Default: ${DEFAULT-VALUE}.")
  long maxQueuedBytes;

  @Option(
      names = "--stream-max-owed-answers",
      defaultValue = "" + ServerConfig.DEFAULT_STREAM_MAX_OWED_ANSWERS,
      description =
          "Answers one session stream may owe (not answered, or not yet read by the client) and"
              + " still read requests; at the bound it reads none until answers leave. At least"
              + " the largest session window (65536). Default: ${DEFAULT-VALUE}.")
  int streamMaxOwedAnswers;

  @Option(
      names = "--stream-max-owed-bytes",
      defaultValue = "" + ServerConfig.DEFAULT_STREAM_MAX_OWED_BYTES,
      description =
          "Bytes of answers one session stream may owe and still read requests; at the bound it"
              + " reads none until answers leave. Default: ${DEFAULT-VALUE}.")
  long streamMaxOwedBytes;

  @Option(
      names = "--stream-stall-timeout-ms",
      defaultValue = "" + ServerConfig.DEFAULT_STREAM_STALL_TIMEOUT_MS,
      description =
          "How long a session stream's answers may wait for a client that reads none of them;"
              + " then the stream ends with RESOURCE_EXHAUSTED (the answers stay saved: the client"
              + " resends and gets them). Default: ${DEFAULT-VALUE}.")
  long streamStallTimeoutMs;

  @Option(
      names = "--log-segment-bytes",
      defaultValue = "8388608",
      description =
          "Size of a Raft log segment; the log is purged behind a snapshot a closed segment at a"
              + " time. Default: ${DEFAULT-VALUE}.")
  long logSegmentBytes;

  @Option(
      names = "--election-timeout-min-ms",
      defaultValue = "300",
      description = "Lower bound of the randomised election timeout. Default: ${DEFAULT-VALUE}.")
  long electionTimeoutMinMs;

  @Option(
      names = "--election-timeout-max-ms",
      defaultValue = "600",
      description =
          "Upper bound of the randomised election timeout; a leader that heard from no majority for"
              + " this long steps down. Default: ${DEFAULT-VALUE}.")
  long electionTimeoutMaxMs;

  @Option(
      names = "--max-connections-per-client",
      defaultValue = "" + ConnectionLimits.DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
      description =
          "Most client-port connections served at once for one client: its certificate subject"
              + " under TLS, else its IP address. Calls on a connection past it fail with"
              + " RESOURCE_EXHAUSTED. 0: no bound. Default: ${DEFAULT-VALUE}.")
  int maxConnectionsPerClient;

  @Option(
      names = "--max-calls-per-connection",
      defaultValue = "" + ConnectionLimits.DEFAULT_MAX_CALLS_PER_CONNECTION,
      description =
          "Most calls (HTTP/2 streams) open at once on one client connection; gRPC clients queue"
              + " the rest. 0: no bound. Default: ${DEFAULT-VALUE}.")
  int maxCallsPerConnection;

  @Option(
      names = "--max-connection-idle-ms",
      defaultValue = "" + ConnectionLimits.DEFAULT_MAX_CONNECTION_IDLE_MS,
      description =
          "Close a client connection without calls (pings do not count) after this long; clients"
              + " reconnect on their next call. 0: never. Default: ${DEFAULT-VALUE}.")
  long maxConnectionIdleMs;

  @Option(
      names = "--max-connection-age-ms",
      defaultValue = "" + ConnectionLimits.DEFAULT_MAX_CONNECTION_AGE_MS,
      description =
          "Close a client connection after this long (+-10%%), after --max-connection-age-grace-ms"
              + " for its calls; clients resume their sessions on a new one. 0: never. Default:"
              + " ${DEFAULT-VALUE}.")
  long maxConnectionAgeMs;

  @Option(
      names = "--max-connection-age-grace-ms",
      defaultValue = "" + ConnectionLimits.DEFAULT_MAX_CONNECTION_AGE_GRACE_MS,
      description =
          "How long calls may go on after --max-connection-age-ms before their connection is"
              + " closed under them. Default: ${DEFAULT-VALUE}.")
  long maxConnectionAgeGraceMs;

  /** Builds the configuration the flags describe. */
  ServerConfig config() {
    List<ServerConfig.Peer> list = new ArrayList<>();
    if (join && peers != null && !peers.isBlank()) {
      throw new IllegalArgumentException(
          "--join takes this node's --raft-address and --client-address, not --peers: the"
              + " cluster it joins names the members");
    }
    if (peers == null || peers.isBlank()) {
      list.add(new ServerConfig.Peer(id, raftAddress, clientAddress));
    } else {
      for (String spec : peers.split(",")) {
        if (!spec.isBlank()) {
          list.add(ServerConfig.Peer.parse(spec.trim()));
        }
      }
    }
    return ServerConfig.builder()
        .id(id)
        .dataDir(dataDir)
        .peers(list)
        .tickIntervalMs(tickMs)
        .electionTimeoutMs(electionTimeoutMinMs, electionTimeoutMaxMs)
        .snapshotEveryEntries(snapshotEvery)
        .groups(groups)
        .maxInFlightBatches(entriesInFlight)
        .maxQueuedCommands(maxQueuedCommands)
        .maxQueuedBytes(maxQueuedBytes)
        .streamMaxOwedAnswers(streamMaxOwedAnswers)
        .streamMaxOwedBytes(streamMaxOwedBytes)
        .streamStallTimeoutMs(streamStallTimeoutMs)
        .logSegmentBytes(logSegmentBytes)
        .clientListen(clientListen)
        .adminAddress(adminAddress)
        .tls(tlsFiles())
        .peerTls(peerTlsFiles())
        .peerSubjects(peerAllow.stream().map(String::trim).filter(a -> !a.isEmpty()).toList())
        .authAdmin(authAdmin)
        .authOff(noAuth)
        .join(join)
        .bootstrapQuotas(QuotaFlags.parse(quotas))
        .bootstrapBackendBytes(QuotaFlags.size(backendBytes))
        .connectionLimits(
            new ConnectionLimits(
                maxConnectionsPerClient,
                maxCallsPerConnection,
                maxConnectionIdleMs,
                maxConnectionAgeMs,
                maxConnectionAgeGraceMs))
        .build();
  }

  private TlsFiles tlsFiles() {
    TlsFiles files =
        files(tlsCert, tlsKey, tlsCa, tlsRequireClientCert, "--tls-cert", "--tls-key", "--tls-ca");
    if (files == null && tlsRequireClientCert) {
      throw new IllegalArgumentException(
          "--tls-require-client-cert needs --tls-cert, --tls-key and --tls-ca");
    }
    return files;
  }

  private TlsFiles peerTlsFiles() {
    return files(
        peerTlsCert,
        peerTlsKey,
        peerTlsCa,
        true,
        "--peer-tls-cert",
        "--peer-tls-key",
        "--peer-tls-ca");
  }

  /** The TLS files the three flags name; null if none is given; all three or none. */
  private static TlsFiles files(
      String cert,
      String key,
      String ca,
      boolean requireClientCertificates,
      String certFlag,
      String keyFlag,
      String caFlag) {
    if (cert.isEmpty() && key.isEmpty() && ca.isEmpty()) {
      return null;
    }
    if (cert.isEmpty() || key.isEmpty() || ca.isEmpty()) {
      throw new IllegalArgumentException(
          "TLS needs all three of " + certFlag + ", " + keyFlag + " and " + caFlag);
    }
    return new TlsFiles(Path.of(cert), Path.of(key), Path.of(ca), requireClientCertificates);
  }

  @Override
  public Integer call() throws Exception {
    Path file = ServerDefaults.file(this);
    if (file != null) {
      new ServerDefaults().load(file, spec); // an unknown key fails even when no flag came from it
    }
    ServerConfig config;
    try {
      config = config();
    } catch (IllegalArgumentException e) {
      System.err.println(
          "idem-server: "
              + e.getMessage()
              + (file == null
                  ? ""
                  : " (settings from the flags, the environment and " + file + ")"));
      return 2;
    }
    boolean joining = join && !IdemServer.hasStoredState(config.dataDir());
    IdemServer server;
    try {
      server = starter.start(config);
    } catch (IOException e) {
      System.err.println("idem-server: " + e.getMessage());
      return 1;
    }
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    server.close();
                    System.out.println("idem-server " + config.id() + ": stopped");
                  } catch (Exception e) {
                    System.err.println("idem-server " + config.id() + ": stopping: " + e);
                    // Not 143, the status of a JVM that a SIGTERM stopped cleanly.
                    Runtime.getRuntime().halt(1);
                  }
                  stopped.countDown();
                },
                "idem-shutdown"));
    System.out.println(
        "idem-server "
            + config.id()
            + ": clients on "
            + config.clientListenAddress()
            + (config.clientListen().isEmpty()
                ? ""
                : " (advertised as " + config.self().clientAddress() + ")")
            + ", raft on "
            + config.self().raftAddress()
            + ", data in "
            + config.dataDir().toAbsolutePath()
            + ", "
            + (joining
                ? (config.groups() == 1
                    ? "joining: waiting for `idem member add --id " + config.id() + "`"
                    : "joining: hosting every group, a member of none, until `idem group move"
                        + " --id "
                        + config.id()
                        + "` adds it to one")
                : config.peers().size() + " member(s)")
            + (config.adminAddress().isEmpty()
                ? ""
                : ", admin (metrics, status page) on port " + server.adminPort()));
    if (config.tls() == null) {
      System.out.println(
          "idem-server "
              + config.id()
              + ": WARNING: plaintext, without access control. Any process that reaches the"
              + " Raft port can act as a peer, and any that reaches the client port may do"
              + " anything, reconfigure the cluster included. Use it on loopback or a trusted"
              + " network only; see docs/SECURITY.md.");
    } else if (config.authOff()) {
      System.out.println(
          "idem-server "
              + config.id()
              + ": WARNING: --no-auth. A new cluster starts without access control: every client"
              + " whose certificate the CA signed may do anything, reconfigure the cluster"
              + " included.");
    }
    stopped.await();
    return 0;
  }

  /**
   * Runs {@code idem server} with {@code args}: the entry point of processes that start a node with
   * a class path rather than the {@code idem} command.
   */
  public static void main(String[] args) {
    Idem.main(prepend("server", args));
  }

  private static String[] prepend(String first, String[] rest) {
    String[] all = new String[rest.length + 1];
    all[0] = first;
    System.arraycopy(rest, 0, all, 1, rest.length);
    return all;
  }
}
