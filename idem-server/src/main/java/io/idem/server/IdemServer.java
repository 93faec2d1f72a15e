package io.idem.server;

import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.ServerInterceptors;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.ClientAuth;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import io.idem.proto.IdemGrpc;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.ratis.proto.RaftProtos.RaftPeerRole;
import org.apache.ratis.server.DivisionInfo;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One Idem node: a Ratis server running the Idem state machine, the leader-side batcher, and the
 * gRPC front door on the client port. Start it with {@link #start}; {@link #close} stops it (what a
 * kill does, minus the process exit).
 */
public final class IdemServer implements AutoCloseable {
  /** The newest log format this code applies and writes ({@code Status.max_log_format}). */
  public static final int MAX_LOG_FORMAT = ReplicatedState.LOG_FORMAT_VERSION;

  private static final Logger LOG = LoggerFactory.getLogger(IdemServer.class);

  /** The shortest interval between a client's keep-alive pings that the client port accepts. */
  static final long PERMIT_KEEP_ALIVE_SECONDS = 5;

  /** How long a client connection may stay silent before the client port pings it. */
  static final long KEEP_ALIVE_SECONDS = 30;

  /** How long the client port waits for a ping's answer before it closes the connection. */
  static final long KEEP_ALIVE_TIMEOUT_SECONDS = 10;

  private final ServerConfig config;
  private final ServerMetrics metrics;
  private final RaftHost host;

  /** The hosted groups by number: 1 alone, or the metadata group 0 and the data groups 1 to G. */
  private final java.util.SortedMap<Integer, Group> groups = new java.util.TreeMap<>();

  /**
   * Group 1's parts, which a cluster of one group consists of (the gauges and the admin page's).
   */
  private final IdemStateMachine stateMachine;

  private final RaftNode raft;
  private final Server grpc;
  private final AdminServer admin;
  private final ConnectionGate connections;
  private final java.util.concurrent.ScheduledExecutorService waits;

  /** Hands each group's leadership back to the node it prefers (several groups only). */
  private final java.util.concurrent.ScheduledExecutorService balancer;

  /** How often a node checks whether it leads a group another node should lead. */
  static final long BALANCE_EVERY_MS = 5_000;

  /** One Raft group as this node hosts it. */
  private record Group(
      int number,
      IdemStateMachine stateMachine,
      RaftNode raft,
      Batcher batcher,
      Membership membership,
      FrontDoor door) {}

  private IdemServer(ServerConfig config, boolean unsafeLocalReads) throws IOException {
    this.config = config;
    NodeMarker.claim(config.dataDir(), config.id());
    this.metrics = new ServerMetrics(config.id());
    int count = config.groups();
    java.util.Map<Integer, IdemStateMachine> machines = new java.util.TreeMap<>();
    for (int g = count == 1 ? 1 : 0; g <= count; g++) {
      machines.put(
          g,
          new IdemStateMachine(
              ReplicatedConfig.of(config),
              ReplicatedConfig.of(config)
                  .bootstrapCommand(
                      config.authAdmin(), config.bootstrapQuotas(), config.bootstrapBackendBytes())
                  .toBuilder()
                  .setGroup(count == 1 ? 0 : g)
                  .setGroupCount(count == 1 ? 0 : count)
                  .build(),
              config.snapshotEveryEntries(),
              metrics));
    }
    this.host = new RaftHost(config, machines);
    this.waits = daemonScheduler("idem-identity-" + config.id());
    this.balancer = daemonScheduler("idem-balance-" + config.id());
    IdemStateMachine meta = machines.get(0);
    for (java.util.Map.Entry<Integer, IdemStateMachine> e : machines.entrySet()) {
      int g = e.getKey();
      IdemStateMachine machine = e.getValue();
      RaftNode node = new RaftNode(host.server(), g, machine);
      Batcher b =
          new Batcher(
              node,
              new Batcher.Settings(
                  config.maxBatchCommands(),
                  config.maxBatchBytes(),
                  config.maxInFlightBatches(),
                  config.maxQueuedCommands(),
                  config.maxQueuedBytes(),
                  config.tickIntervalMs()),
              System::currentTimeMillis,
              machine::bootstrapCommand,
              machine::writeFormat,
              "idem-batcher-" + config.id() + (count == 1 ? "" : "-g" + g));
      Membership m =
          new Membership(
              node,
              a -> probe(a, count == 1 ? -1 : g, config.tls()),
              machine::writeFormat,
              count == 1 ? (added, removed) -> null : (added, removed) -> order(g, added, removed));
      FrontDoor door =
          new FrontDoor(
              node,
              b,
              machine,
              () -> status(g),
              m,
              unsafeLocalReads,
              metrics,
              config.streamBounds(),
              meta != null && g > 0 ? identityCheck(meta) : null,
              count);
      groups.put(g, new Group(g, machine, node, b, m, door));
    }
    Group first = groups.get(1);
    this.stateMachine = first.stateMachine();
    this.raft = first.raft();
    java.util.Map<Integer, FrontDoor> doors = new java.util.HashMap<>();
    groups.forEach((g, group) -> doors.put(g, group.door()));
    GroupRouter router = new GroupRouter(doors);
    String client = config.clientListenAddress();
    int colon = client.lastIndexOf(':');
    ConnectionLimits bounds = config.connectionLimits();
    this.connections =
        new ConnectionGate(bounds.maxConnectionsPerClient(), metrics::connectionRefused);
    try {
      NettyServerBuilder builder =
          NettyServerBuilder.forAddress(
                  new InetSocketAddress(
                      client.substring(0, colon), Integer.parseInt(client.substring(colon + 1))))
              // The gate goes last: the last interceptor runs first, so that a refused
              // connection's calls reach nothing else.
              .addService(
                  ServerInterceptors.intercept(router, router, new ClientPrincipal(), connections))
              .addTransportFilter(connections)
              // Handlers run on the I/O threads: they only queue commands or read the state
              // briefly, and the hop to an executor per message cost a sixth of the leader's CPU.
              .directExecutor()
              // Clients ping idle connections every 10 s, also without calls; grpc-java's default
              // (one ping per 5 minutes, none without calls) answers the third early one with
              // GOAWAY(too_many_pings) and drops the connection. Accept one every 5 s instead.
              .permitKeepAliveTime(PERMIT_KEEP_ALIVE_SECONDS, TimeUnit.SECONDS)
              .permitKeepAliveWithoutCalls(true)
              // And ping idle clients ourselves, so that streams on dead connections end.
              .keepAliveTime(KEEP_ALIVE_SECONDS, TimeUnit.SECONDS)
              .keepAliveTimeout(KEEP_ALIVE_TIMEOUT_SECONDS, TimeUnit.SECONDS)
              // Sized for the largest limits the replicated configuration may set, not for the
              // ones in force: those change through the log, and the state machine answers a
              // request over them with INVALID_ARGUMENT.
              .maxInboundMessageSize(
                  Limits.MAX_VALUE_BYTES_LIMIT + Limits.MAX_KEY_BYTES_LIMIT + (64 << 10))
              .sslContext(serverTls(config.tls()));
      this.grpc = bounded(builder, bounds).build().start();
    } catch (IOException e) {
      closeGroups();
      throw new IOException("cannot listen for clients on " + client + ": " + e.getMessage(), e);
    }
    registerGauges();
    if (config.adminAddress().isEmpty()) {
      this.admin = null;
    } else {
      try {
        this.admin =
            new AdminServer(
                config.adminAddress(),
                metrics,
                config.tls(),
                this::status,
                n -> stateMachine.inspect(s -> s.sessions.largest(n)),
                principal -> stateMachine.adminDenial(principal, "see sessions") == null);
      } catch (IOException | RuntimeException e) {
        grpc.shutdownNow();
        closeGroups();
        throw new IOException(
            "cannot serve the admin endpoint on " + config.adminAddress() + ": " + e.getMessage(),
            e);
      }
    }
    if (config.groups() > 1) {
      balancer.scheduleWithFixedDelay(
          this::balanceLeaders, BALANCE_EVERY_MS, BALANCE_EVERY_MS, TimeUnit.MILLISECONDS);
    }
    LOG.info(
        "node {} serving clients on {}, raft on {}",
        config.id(),
        client,
        config.self().raftAddress());
  }

  /** A scheduler of one daemon thread named {@code name}. */
  private static java.util.concurrent.ScheduledExecutorService daemonScheduler(String name) {
    return java.util.concurrent.Executors.newSingleThreadScheduledExecutor(
        r -> {
          Thread t = new Thread(r, name);
          t.setDaemon(true);
          return t;
        });
  }

  /** {@code b} with the bounds of {@code limits} that are on; grpc-java's defaults are all off. */
  private static NettyServerBuilder bounded(NettyServerBuilder b, ConnectionLimits limits) {
    if (limits.maxCallsPerConnection() > 0) {
      b.maxConcurrentCallsPerConnection(limits.maxCallsPerConnection());
    }
    if (limits.maxConnectionIdleMs() > 0) {
      b.maxConnectionIdle(limits.maxConnectionIdleMs(), TimeUnit.MILLISECONDS);
    }
    if (limits.maxConnectionAgeMs() > 0) {
      b.maxConnectionAge(limits.maxConnectionAgeMs(), TimeUnit.MILLISECONDS)
          .maxConnectionAgeGrace(limits.maxConnectionAgeGraceMs(), TimeUnit.MILLISECONDS);
    }
    return b;
  }

  /**
   * Another node's Status of {@code group} (-1: no group named, a cluster of one group), asked at
   * its client address within {@link Membership#PROBE_TIMEOUT_MS}, over TLS with this node's
   * certificate when it has one.
   */
  private static StatusReply probe(String address, int group, TlsFiles tls) {
    NettyChannelBuilder b = NettyChannelBuilder.forTarget(address);
    ManagedChannel channel;
    if (tls == null) {
      channel = b.usePlaintext().build();
    } else {
      try {
        channel =
            b.sslContext(
                    GrpcSslContexts.forClient()
                        .trustManager(tls.trustedCertificates().toFile())
                        .keyManager(tls.certificateChain().toFile(), tls.privateKey().toFile())
                        .build())
                .build();
      } catch (javax.net.ssl.SSLException e) {
        throw new IllegalStateException("cannot use the TLS files " + tls, e);
      }
    }
    try {
      IdemGrpc.IdemBlockingStub stub =
          IdemGrpc.newBlockingStub(channel)
              .withDeadlineAfter(Membership.PROBE_TIMEOUT_MS, TimeUnit.MILLISECONDS);
      if (group >= 0) {
        stub = stub.withInterceptors(io.idem.proto.GroupHeader.naming(group));
      }
      return stub.status(StatusRequest.getDefaultInstance());
    } catch (io.grpc.StatusRuntimeException e) {
      throw new IllegalStateException(e.getStatus().getCode().toString(), e);
    } finally {
      channel.shutdownNow();
    }
  }

  /** The client port's TLS context, or null for plaintext. */
  private static SslContext serverTls(TlsFiles tls) throws IOException {
    if (tls == null) {
      return null;
    }
    try {
      return GrpcSslContexts.forServer(tls.certificateChain().toFile(), tls.privateKey().toFile())
          .trustManager(tls.trustedCertificates().toFile())
          .clientAuth(tls.requireClientCertificates() ? ClientAuth.REQUIRE : ClientAuth.OPTIONAL)
          .build();
    } catch (IllegalArgumentException | javax.net.ssl.SSLException e) {
      throw new IOException("cannot use the TLS files " + tls + ": " + e.getMessage(), e);
    }
  }

  /**
   * Starts a node: recovers its state from {@code config.dataDir()} (snapshot and log) and joins
   * the cluster of {@code config.peers()}.
   *
   * @throws IOException if the data directory or a port cannot be used
   */
  public static IdemServer start(ServerConfig config) throws IOException {
    return new IdemServer(config, false);
  }

  /**
   * Starts a node that answers reads from its local state machine as soon as it believes it leads,
   * without the read barrier that confirms its leadership ({@link Batcher#barrier}): a deposed
   * leader that has not noticed yet answers stale reads, which are not linearizable. Only the
   * verification's negative control starts one (docs/VERIFICATION.md, "Reads under partitions"),
   * through the test jar's {@code io.idem.server.NegativeControls}: no flag, key or variable of a
   * production node reaches it.
   */
  static IdemServer startWithUnsafeLocalReads(ServerConfig config) throws IOException {
    return new IdemServer(config, true);
  }

  /**
   * Whether {@code dataDir} holds a node's state from an earlier run (a restart), not only a marker
   * or nothing (a first start).
   */
  public static boolean hasStoredState(java.nio.file.Path dataDir) throws IOException {
    return NodeMarker.hasState(dataDir);
  }

  /** The configuration this node runs with. */
  public ServerConfig config() {
    return config;
  }

  /** The port of the admin endpoint ({@code /metrics}, the status page), or -1 if it has none. */
  public int adminPort() {
    return admin == null ? -1 : admin.port();
  }

  /** The registry of this node's meters, as {@code /metrics} shows them. */
  public io.micrometer.core.instrument.MeterRegistry meterRegistry() {
    return metrics.registry();
  }

  /**
   * The gauges read when scraped: the replicated state's sizes, summed over this node's replicas of
   * every group (a client with sessions in several groups counts once per group); the backend in
   * use of the fullest group, against the budget (which holds per group, the same in each); the
   * alarm if any group has it; and Raft's view of data group 1 (the only one in a cluster of one
   * group).
   */
  private void registerGauges() {
    MeterRegistry r = metrics.registry();
    Gauge.builder("idem.sessions.live", this, s -> s.sumOverGroups(st -> st.sessions.size()))
        .description("Live client sessions in the replicated table")
        .register(r);
    Gauge.builder("idem.client.connections", connections, ConnectionGate::served)
        .description("Client-port connections served now (refused ones are not counted)")
        .register(r);
    FunctionCounter.builder("idem.client.connections.opened", connections, ConnectionGate::admitted)
        .description("Client-port connections served since the node started")
        .register(r);
    Gauge.builder("idem.key.records", this, s -> s.sumOverGroups(st -> st.keys.size()))
        .description("Application idempotency key records")
        .register(r);
    Gauge.builder("idem.leases", this, s -> s.sumOverGroups(st -> st.leases.size()))
        .description("Live leases")
        .register(r);
    Gauge.builder("idem.kv.keys", this, s -> s.sumOverGroups(st -> st.kv.size()))
        .description("Keys in the KV store")
        .register(r);
    Gauge.builder("idem.backend.used.bytes", this, s -> s.maxOverGroups(st -> st.backendUsed()))
        .description("The replicated state's estimated size, which the backend budget bounds")
        .baseUnit("bytes")
        .register(r);
    Gauge.builder(
            "idem.backend.budget.bytes",
            this,
            s -> s.inspectState(st -> st.configuration.quotas.backendBytes()))
        .description("The backend budget: past it, writes that grow the state get NO_SPACE")
        .baseUnit("bytes")
        .register(r);
    Gauge.builder(
            "idem.backend.alarm",
            this,
            s -> s.maxOverGroups(st -> st.configuration.quotas.alarm() ? 1 : 0))
        .description("1 while the NO_SPACE alarm is raised")
        .register(r);
    FunctionCounter.builder(
            "idem.duplicates.suppressed",
            this,
            s -> s.sumOverGroups(ReplicatedState::duplicatesSuppressed))
        .description("Retried requests answered from saved answers, never applied again")
        .register(r);
    // Every hosted group's Raft view, tagged with its number (1 in a cluster of one group).
    for (Group g : groups.values()) {
      String group = Integer.toString(g.number());
      Gauge.builder("idem.raft.term", g.raft(), n -> n.term())
          .description("The Raft term this node's replica of the group is in")
          .tag("group", group)
          .register(r);
      Gauge.builder("idem.raft.commit.index", g.raft(), n -> n.commitIndex())
          .description("The highest log index this node's replica of the group knows committed")
          .tag("group", group)
          .register(r);
      Gauge.builder(
              "idem.raft.applied.index",
              g.stateMachine(),
              m -> m.inspect(ReplicatedState::appliedIndex))
          .description("The last log index applied to this node's replica of the group")
          .tag("group", group)
          .register(r);
      for (RaftPeerRole role :
          List.of(RaftPeerRole.LEADER, RaftPeerRole.FOLLOWER, RaftPeerRole.CANDIDATE)) {
        Gauge.builder("idem.raft.role", g.raft(), n -> n.role() == role ? 1 : 0)
            .description(
                "1 for the Raft role this node's replica of the group is in (0 for every role"
                    + " outside the group's configuration)")
            .tag("group", group)
            .tag("role", role.name().toLowerCase(java.util.Locale.ROOT))
            .register(r);
      }
    }
  }

  private double inspectState(java.util.function.ToDoubleFunction<ReplicatedState> reader) {
    return stateMachine.inspect(reader::applyAsDouble);
  }

  private double sumOverGroups(java.util.function.ToDoubleFunction<ReplicatedState> reader) {
    return overGroups(reader, Double::sum);
  }

  private double maxOverGroups(java.util.function.ToDoubleFunction<ReplicatedState> reader) {
    return overGroups(reader, Math::max);
  }

  /** {@code reader} of this node's replica of every group, folded with {@code combine}. */
  private double overGroups(
      java.util.function.ToDoubleFunction<ReplicatedState> reader,
      java.util.function.DoubleBinaryOperator combine) {
    double result = 0;
    for (Group g : groups.values()) {
      result = combine.applyAsDouble(result, g.stateMachine().inspect(reader::applyAsDouble));
    }
    return result;
  }

  /** The port the client endpoint listens on. */
  public int clientPort() {
    return grpc.getPort();
  }

  /** Whether this node currently leads. */
  public boolean isLeader() {
    return raft.isLeader();
  }

  /** The log index of the last entry this node applied. */
  public long appliedIndex() {
    return stateMachine.inspect(ReplicatedState::appliedIndex);
  }

  /**
   * The first index still in this node's log. Above 1 once the log was purged behind a snapshot: a
   * node that lacks the entries below it can only catch up through snapshot install.
   */
  public long logStartIndex() {
    try {
      return raft.logStartIndex();
    } catch (IOException e) {
      return -1;
    }
  }

  /**
   * If this node leads, hands leadership to node {@code peerId} (which should be caught up).
   *
   * @throws IOException if the transfer fails or times out
   */
  public void transferLeadership(String peerId, Duration timeout) throws IOException {
    raft.transferLeadership(peerId, timeout.toMillis());
  }

  /**
   * If this node leads group {@code group}, hands its leadership to node {@code peerId}. The leader
   * balancer may hand it back within a round ({@link #BALANCE_EVERY_MS}) if its plan names another
   * node.
   *
   * @throws IOException if the transfer fails or times out
   * @throws IllegalArgumentException if this node hosts no such group
   */
  public void transferLeadership(int group, String peerId, Duration timeout) throws IOException {
    Group g = groups.get(group);
    if (g == null) {
      throw new IllegalArgumentException("no group " + group + " on " + config.id());
    }
    g.raft().transferLeadership(peerId, timeout.toMillis());
  }

  /** A digest of the replicated state; equal on replicas that applied the same entries. */
  public String digest() {
    return stateMachine.inspect(StateSnapshot::digest);
  }

  /** The node's status, as the {@code Status} RPC reports it without a group: group 1's. */
  public StatusReply status() {
    return status(1);
  }

  /**
   * The node's status as group {@code g} sees it, as the {@code Status} RPC reports it for that
   * group; with several groups, a line for every hosted group too.
   */
  StatusReply status(int g) {
    Group group = groups.get(g);
    IdemStateMachine machine = group.stateMachine();
    RaftNode node = group.raft();
    StatusReply.Builder b =
        StatusReply.newBuilder()
            .setId(config.id())
            .setGroup(g)
            .setEntriesAppended(group.batcher().entriesAppended())
            .setCommandsAppended(group.batcher().commandsAppended())
            .setEntriesSkipped(metrics.entriesSkipped())
            .setMaxLogFormat(ReplicatedState.LOG_FORMAT_VERSION);
    machine.inspect(
        s ->
            b.setAppliedIndex(s.appliedIndex())
                .setLiveSessions(s.sessions.size())
                .setDuplicatesSuppressed(s.duplicatesSuppressed())
                .setKeys(s.kv.size())
                .setKeyRecords(s.keys.size())
                .setLeases(s.leases.size())
                .setLogTimeMs(s.clock())
                .setLimits(s.configuration.current().limitsProto())
                .setSessions(s.configuration.current().boundsProto())
                .setConfigRevision(s.configuration.revision())
                .setLogFormat(s.configuration.logFormat())
                .setAuthEnabled(s.auth.enabled())
                .setBackendUsedBytes(s.backendUsed())
                .setBackendBytes(s.configuration.quotas.backendBytes())
                .setNoSpaceAlarm(s.configuration.quotas.alarm())
                .setQuotas(s.configuration.quotas.defaults().toProto()));
    IdemStateMachine.Digest digest = machine.digestAtSnapshot();
    b.setDigest(digest.hex()).setDigestIndex(digest.index());
    try {
      b.setLogStartIndex(node.logStartIndex());
    } catch (IOException e) {
      b.setLogStartIndex(-1);
    }
    try {
      DivisionInfo info = node.division();
      b.setRole(node.roleName(info))
          .setTerm(info.getCurrentTerm())
          .setLeaderId(info.getLeaderId() == null ? "" : info.getLeaderId().toString())
          .setLeaderAddress(node.leaderClientAddress());
    } catch (IOException e) {
      b.setRole(node.isClosed() ? "CLOSED" : "UNAVAILABLE")
          .setLeaderAddress(node.leaderClientAddress());
    }
    // The configuration in force (it changes with `idem member`), not the peers this node started
    // with.
    b.addAllMembers(group.membership().members());
    int count = config.groups();
    b.setMap(
        count == 1
            ? io.idem.proto.PartitionMap.newBuilder()
                .setEpoch(io.idem.proto.Partitions.FIRST_EPOCH)
                .setGroupCount(1)
                .build()
            : io.idem.proto.Partitions.firstMap(count));
    if (count > 1) {
      for (Group each : groups.values()) {
        b.addGroups(groupStatus(each));
      }
    }
    return b.build();
  }

  /** One line of the status: a group as this node sees it. */
  private static io.idem.proto.GroupStatus groupStatus(Group group) {
    io.idem.proto.GroupStatus.Builder b =
        io.idem.proto.GroupStatus.newBuilder().setGroup(group.number());
    group
        .stateMachine()
        .inspect(
            s ->
                b.setAppliedIndex(s.appliedIndex())
                    .setLiveSessions(s.sessions.size())
                    .setKeyRecords(s.keys.size())
                    .setKeys(s.kv.size()));
    try {
      DivisionInfo info = group.raft().division();
      b.setRole(group.raft().roleName(info))
          .setTerm(info.getCurrentTerm())
          .setLeaderId(info.getLeaderId() == null ? "" : info.getLeaderId().toString())
          .setLeaderAddress(group.raft().leaderClientAddress());
    } catch (IOException e) {
      b.setRole(group.raft().isClosed() ? "CLOSED" : "UNAVAILABLE")
          .setLeaderAddress(group.raft().leaderClientAddress());
    }
    b.addAllMembers(group.membership().members());
    return b.build();
  }

  /**
   * The metadata group's check of a data group's registration ({@link FrontDoor.IdentityCheck}).
   * The client id is a registration's position in the metadata group's log ({@code index * } {@link
   * ReplicatedState#MAX_COMMANDS_PER_ENTRY} {@code + position}), so this node's replica of it knows
   * the id once it applied that index: the check waits for that, up to {@link #IDENTITY_WAIT_MS},
   * then reads the session there.
   */
  private FrontDoor.IdentityCheck identityCheck(IdemStateMachine meta) {
    return (clientId, epoch, hi, lo, principal) -> {
      long index = clientId / ReplicatedState.MAX_COMMANDS_PER_ENTRY;
      java.util.concurrent.CompletableFuture<String> answer =
          new java.util.concurrent.CompletableFuture<>();
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(IDENTITY_WAIT_MS);
      Runnable attempt =
          new Runnable() {
            @Override
            public void run() {
              // This replica of the metadata group may lag its leader: until the deadline, a
              // session or an epoch it does not know yet is waited for, not refused.
              String problem =
                  meta.inspect(ReplicatedState::appliedIndex) < index
                      ? "the metadata group has not applied client id "
                          + clientId
                          + " on this node within "
                          + IDENTITY_WAIT_MS
                          + " ms: retry"
                      : identityProblem(meta, clientId, epoch, hi, lo, principal);
              boolean settled =
                  problem == null
                      || meta.authenticate(clientId, hi, lo, principal)
                          == IdemStateMachine.Authentication.WRONG_SECRET;
              if (settled || System.nanoTime() - deadline > 0) {
                answer.complete(problem);
                return;
              }
              try {
                waits.schedule(this, 10, TimeUnit.MILLISECONDS);
              } catch (java.util.concurrent.RejectedExecutionException e) {
                answer.complete("the node is closing");
              }
            }
          };
      attempt.run();
      return answer;
    };
  }

  /** How long a data group's registration waits for the metadata group to know its client id. */
  static final long IDENTITY_WAIT_MS = 5_000;

  private static String identityProblem(
      IdemStateMachine meta, long clientId, long epoch, long hi, long lo, String principal) {
    switch (meta.authenticate(clientId, hi, lo, principal)) {
      case UNKNOWN_SESSION:
        return "client id "
            + clientId
            + " names no live session of the metadata group: register there first";
      case WRONG_SECRET:
        return "the secret or principal does not match client id "
            + clientId
            + "'s session in the metadata group";
      default:
        break;
    }
    long granted = meta.inspect(s -> s.sessions.epochOf(clientId));
    if (epoch > granted) {
      return "epoch "
          + epoch
          + " is above the epoch "
          + granted
          + " the metadata group granted client id "
          + clientId;
    }
    return null;
  }

  /**
   * What a change of group {@code g}'s members must not do in a cluster of several groups, or null.
   * A data group's leader checks each client's registration in its own replica of the metadata
   * group ({@link #identityCheck}), which follows that group's log only on its members: so a node
   * joins a data group only once it is a member of the metadata group, and leaves the metadata
   * group only once it left every data group. Judged on this node's replicas; a data group's
   * members are read only where this node is one of them (elsewhere its view may be old).
   */
  private String order(int g, List<String> added, List<String> removed) {
    if (g > 0) {
      java.util.Set<String> meta = memberIds(groups.get(0).raft(), false);
      for (String id : added) {
        if (!meta.contains(id)) {
          return id
              + " is not a member of the metadata group (0): a data group's leader checks its"
              + " clients' registrations in its own replica of group 0, so a node joins group 0"
              + " first: idem group add --group 0 --id "
              + id
              + " (with its addresses)";
        }
      }
      return null;
    }
    for (String id : removed) {
      List<Integer> holding = new java.util.ArrayList<>();
      for (Group each : groups.values()) {
        if (each.number() > 0) {
          java.util.Set<String> ids = memberIds(each.raft(), true);
          if (ids.contains(config.id()) && ids.contains(id)) {
            holding.add(each.number());
          }
        }
      }
      if (!holding.isEmpty()) {
        return id
            + " is still a member of data group(s) "
            + holding
            + ", whose leaders check clients' registrations in their replica of the metadata group:"
            + " move those groups off it first (idem group move --group G --from "
            + id
            + " ...)";
      }
    }
    return null;
  }

  /** The ids in {@code raft}'s configuration (with those leaving, if {@code leaving}). */
  private static java.util.Set<String> memberIds(RaftNode raft, boolean leaving) {
    java.util.Set<String> ids = new java.util.HashSet<>();
    try {
      org.apache.ratis.server.RaftConfiguration conf = raft.configuration();
      conf.getCurrentPeers().forEach(p -> ids.add(p.getId().toString()));
      if (leaving) {
        conf.getPreviousPeers().forEach(p -> ids.add(p.getId().toString()));
      }
    } catch (IOException e) {
      // not running: no members known
    }
    return ids;
  }

  /** The hosted group numbers: {@code [1]}, or {@code [0, 1, ..., G]}. */
  public java.util.List<Integer> groupNumbers() {
    return java.util.List.copyOf(groups.keySet());
  }

  /** Whether this node currently leads group {@code g}. */
  public boolean isLeader(int g) {
    Group group = groups.get(g);
    return group != null && group.raft().isLeader();
  }

  /**
   * One round of leader balancing: for each group this node leads but plans for another node
   * ({@link LeaderPlan}), if it has led for an election timeout and that node answered within the
   * last half second and holds the log to within 100 entries of this node's applied index, hands it
   * the leadership (Ratis's transfer: the leader pauses new writes until the target has caught up,
   * at most a second, then the target starts an election). Ratis's peer priority does the same on
   * its own, but only when the preferred follower's log matches the leader's last entry at the
   * moment it checks, which a busy group (or its ticks) can postpone for long: in a test, a group's
   * leadership stayed off its node for 30 s.
   *
   * <p>A group with a member of priority above 0 needs only its own configuration. For the others
   * the plan needs every group's voters ({@link #clusterVoters}); a round that cannot see them all
   * moves none of those groups.
   */
  private void balanceLeaders() {
    Map<Integer, String> plan = null;
    for (Group g : groups.values()) {
      if (!g.raft().isLeader()) {
        continue;
      }
      LeaderPlan.Voters mine = voters(g.number(), g.membership().members());
      if (mine == null) {
        continue;
      }
      String preferred = mine.pinned();
      if (preferred == null) {
        if (plan == null) {
          Map<Integer, LeaderPlan.Voters> all = clusterVoters();
          plan = all.size() == groups.size() ? LeaderPlan.plan(all.values()) : Map.of();
        }
        preferred = plan.get(g.number());
      }
      if (preferred == null
          || preferred.equals(config.id())
          || !g.raft()
              .leadsWithFollowerInTouch(preferred, config.electionTimeoutMaxMs(), 500, 100)) {
        continue;
      }
      try {
        g.raft().transferLeadership(preferred, 1_000);
        LOG.info("group {}: leadership handed to {}, the node it plans", g.number(), preferred);
      } catch (IOException | RuntimeException e) {
        // A round that fails leaves the leader where it is; the next round tries again.
        LOG.debug("group {}: leadership not handed to {}: {}", g.number(), preferred, e.toString());
      }
    }
  }

  /** A group's voters and their priorities, from a member's list; null if it names no voter. */
  private static LeaderPlan.Voters voters(int group, List<io.idem.proto.Member> members) {
    Map<String, Integer> priority = new java.util.HashMap<>();
    for (io.idem.proto.Member m : members) {
      if (m.getVoter()) {
        priority.put(m.getId(), m.getPriority());
      }
    }
    return priority.isEmpty() ? null : new LeaderPlan.Voters(group, priority);
  }

  /**
   * Every group's voters, as far as this round can see them, each as its leader sees them: this
   * node's view of the groups it leads, then the Status of other nodes (at most one call to each
   * node named by a group's members, {@link Membership#PROBE_TIMEOUT_MS} each) for the others. A
   * leader holds its group's newest configuration; a follower still replaying its log after a
   * restart may not, and in a 10-minute campaign two nodes that planned from such views handed a
   * group back and forth four times in eight seconds.
   */
  private Map<Integer, LeaderPlan.Voters> clusterVoters() {
    Map<Integer, LeaderPlan.Voters> known = new java.util.TreeMap<>();
    Map<String, String> addresses = new java.util.TreeMap<>();
    for (Group g : groups.values()) {
      if (g.raft().member()) {
        List<io.idem.proto.Member> members = g.membership().members();
        learn(g.number(), members, g.raft().isLeader() ? known : null, addresses);
      }
    }
    java.util.Set<String> asked = new java.util.HashSet<>(List.of(config.id()));
    while (known.size() < groups.size()) {
      String next =
          addresses.keySet().stream().filter(id -> !asked.contains(id)).findFirst().orElse(null);
      if (next == null) {
        break;
      }
      asked.add(next);
      StatusReply reply;
      try {
        reply = probe(addresses.get(next), -1, config.tls());
      } catch (RuntimeException e) {
        LOG.debug("leader balancing: no status from {}: {}", next, e.toString());
        continue;
      }
      for (io.idem.proto.GroupStatus gs : reply.getGroupsList()) {
        if (groups.containsKey(gs.getGroup())) {
          learn(
              gs.getGroup(),
              gs.getMembersList(),
              gs.getRole().equals("LEADER") ? known : null,
              addresses);
        }
      }
    }
    return known;
  }

  /**
   * Records a group's voters in {@code known} (unless null: not a leader's view) and its members'
   * client addresses in {@code addresses}.
   */
  private static void learn(
      int group,
      List<io.idem.proto.Member> members,
      @Nullable Map<Integer, LeaderPlan.Voters> known,
      Map<String, String> addresses) {
    LeaderPlan.Voters v = voters(group, members);
    if (v != null && known != null) {
      known.putIfAbsent(group, v);
    }
    for (io.idem.proto.Member m : members) {
      if (!m.getClientAddress().isEmpty()) {
        addresses.putIfAbsent(m.getId(), m.getClientAddress());
      }
    }
  }

  /** Stops every group's batcher and membership, and the Raft server. */
  private void closeGroups() throws IOException {
    waits.shutdownNow();
    balancer.shutdownNow();
    for (Group g : groups.values()) {
      g.membership().close();
      g.batcher().close();
    }
    host.close();
  }

  /** Stops the client endpoint, the batchers and the Raft server. */
  @Override
  public void close() throws IOException {
    if (admin != null) {
      admin.close();
    }
    grpc.shutdownNow();
    try {
      closeGroups();
    } finally {
      try {
        grpc.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
