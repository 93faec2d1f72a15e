package io.idem.verify;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.idem.client.ClientTls;
import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.client.MembershipChange;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Permission;
import io.idem.proto.Role;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import io.idem.proto.UserRoles;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * A cluster of real {@code idem server} processes on loopback, each with its own data directory and
 * log file, that can be killed with SIGKILL, paused with SIGSTOP, resumed, restarted and wiped. The
 * servers run from this JVM's class path. Clients reach each node through a {@link FaultProxy} (the
 * peer list advertises the proxy, the node binds its own port with {@code --client-listen}), so
 * that responses can be lost, connections reset and traffic delayed between clients and nodes.
 * Nodes reach each other's Raft ports through a {@link PeerNetwork} (a proxy per ordered pair of
 * nodes, each node's peer list naming its own links), so that the peers can be partitioned; a
 * member added at runtime goes through them only after {@link #relink}. Nodes snapshot every
 * {@value #SNAPSHOT_EVERY} entries in small log segments, so that their logs are purged and a wiped
 * node comes back through snapshot install.
 */
public final class ProcessCluster implements AutoCloseable {
  static final int SNAPSHOT_EVERY = 2_000;
  private static final int LOG_SEGMENT_BYTES = 64 << 10;

  private final Path dir;

  // One slot per node, by index. A slot keeps its index for the cluster's life; a replaced node's
  // slot takes the new member (a new id, new ports, a new proxy), and a removed node's slot stays,
  // stopped, with removed set.
  private final List<String> ids = new ArrayList<>();
  private final List<String> listenAddresses = new ArrayList<>();
  private final List<String> raftAddresses = new ArrayList<>();
  private final List<FaultProxy> proxies = new ArrayList<>();
  private final List<Boolean> joiners = new ArrayList<>();
  private final List<Boolean> members = new ArrayList<>();
  private final List<Boolean> removed = new ArrayList<>();
  private final List<Process> processes = new ArrayList<>();
  private final List<Boolean> paused = new ArrayList<>();
  private final List<ManagedChannel> statusChannels = new ArrayList<>();
  private final List<List<String>> extraArgs = new ArrayList<>();
  private final PeerNetwork network = new PeerNetwork(List.of());
  private final int snapshotEvery;
  private int lastId;

  /** The certificates of a cluster run with TLS and access control; null: plaintext. */
  private TestCertificates certs;

  /** The principal a secured cluster bootstraps as its admin. */
  static final String ADMIN = "CN=admin";

  /** The role the clients of a secured cluster hold: every KV key, key scope and lease. */
  static final String CLIENT_ROLE = "campaign-client";

  /** Chooses free loopback ports for {@code n} nodes and starts their proxies; starts no node. */
  public ProcessCluster(Path dir, int n) {
    this(dir, n, SNAPSHOT_EVERY);
  }

  /** The same, with nodes that snapshot every {@code snapshotEvery} entries. */
  public ProcessCluster(Path dir, int n, int snapshotEvery) {
    this.dir = dir;
    this.snapshotEvery = snapshotEvery;
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create " + dir, e);
    }
    for (int i = 0; i < n; i++) {
      newSlot(false);
    }
  }

  /** A slot for a node with a new id and new ports and links; returns its index. */
  private int newSlot(boolean joiner) {
    String listen = "127.0.0.1:" + freePort();
    String raft = "127.0.0.1:" + freePort();
    ids.add("n" + ++lastId);
    listenAddresses.add(listen);
    raftAddresses.add(raft);
    proxies.add(FaultProxy.start(listen));
    network.add(raft);
    joiners.add(joiner);
    members.add(!joiner);
    removed.add(false);
    processes.add(null);
    paused.add(false);
    statusChannels.add(null);
    extraArgs.add(List.of());
    return ids.size() - 1;
  }

  /**
   * Node {@code i}'s peer list: every member (and itself), each as the node binds its own Raft port
   * and reaches node j through the link i -> j; every node names the same client address (the
   * client proxy) for a node.
   */
  private String peers(int i) {
    List<String> specs = new ArrayList<>();
    for (int j = 0; j < ids.size(); j++) {
      if (j == i || members.get(j)) {
        String r = i == j ? raftAddresses.get(j) : network.raftAddressSeenBy(i, j);
        specs.add(ids.get(j) + "=" + r + ":" + port(proxies.get(j).address()));
      }
    }
    return String.join(",", specs);
  }

  private static String port(String address) {
    return address.substring(address.lastIndexOf(':') + 1);
  }

  /**
   * Runs every node, from its next start on (joiners included), with TLS on both ports and access
   * control on: the {@code node} certificate of {@code certs}, client certificates required, the
   * members named by their subject, {@link #ADMIN} as the bootstrap admin. Clients then use {@link
   * #clientTls()}; call {@link #grantClients} once a leader is up.
   */
  public synchronized void secure(TestCertificates certs) {
    this.certs = certs;
  }

  /** The flags of a secured node; none for a plaintext one. */
  private List<String> securityArgs() {
    if (certs == null) {
      return List.of();
    }
    return List.of(
        "--tls-cert",
        certs.certificate("node").toString(),
        "--tls-key",
        certs.key("node").toString(),
        "--tls-ca",
        certs.certificate("ca").toString(),
        "--tls-require-client-cert",
        "--peer-allow",
        TestCertificates.NODE_SUBJECT,
        "--auth-admin",
        ADMIN);
  }

  /** The TLS of the campaign's clients ({@code CN=client}); null for a plaintext cluster. */
  public synchronized ClientTls clientTls() {
    return tls("client");
  }

  /**
   * The TLS of {@code who}'s certificate ({@code CN=who}, one of {@link TestCertificates}'), or
   * null for a plaintext cluster.
   */
  synchronized ClientTls tls(String who) {
    return certs == null
        ? null
        : new ClientTls(certs.certificate("ca"), certs.certificate(who), certs.key(who));
  }

  /**
   * On a secured cluster, gives the clients' principal ({@code CN=client}) the role {@link
   * #CLIENT_ROLE}, as the admin, through the leader; nothing on a plaintext one.
   *
   * @throws IllegalStateException if no leader took it within {@code timeout}
   */
  public void grantClients(Duration timeout) throws InterruptedException {
    if (certs == null) {
      return;
    }
    Role role =
        Role.newBuilder()
            .setName(CLIENT_ROLE)
            .addPermissions(
                Permission.newBuilder().setKind(Permission.Kind.KV_READ_WRITE).setPrefix(""))
            .addPermissions(
                Permission.newBuilder().setKind(Permission.Kind.KEY_SCOPE).setPrefix(""))
            .addPermissions(Permission.newBuilder().setKind(Permission.Kind.LEASE).setPrefix(""))
            .build();
    grant("CN=client", role, timeout);
  }

  /**
   * On a secured cluster, puts {@code role} and grants it to {@code principal}, as the admin,
   * through the leader.
   *
   * @throws IllegalStateException if the cluster is plaintext, or no leader took a change within
   *     {@code timeout}
   */
  void grant(String principal, Role role, Duration timeout) throws InterruptedException {
    if (certs == null) {
      throw new IllegalStateException("a plaintext cluster has no roles: " + role.getName());
    }
    List<AuthRequest> changes =
        List.of(
            AuthRequest.newBuilder().setPutRole(role).build(),
            AuthRequest.newBuilder()
                .setGrant(UserRoles.newBuilder().setPrincipal(principal).addRoles(role.getName()))
                .build());
    for (AuthRequest change : changes) {
      asAdmin(change.toString(), admin -> admin.auth(change).getCode(), timeout);
    }
  }

  /**
   * Changes the replicated configuration (the Configure RPC) through the leader, as the admin on a
   * secured cluster.
   *
   * @throws IllegalStateException if no leader took it within {@code timeout}
   */
  void configure(ConfigureRequest change, Duration timeout) throws InterruptedException {
    asAdmin(change.toString(), admin -> admin.configure(change).getCode(), timeout);
  }

  /** Sends {@code change} to the leader until one answers OK, or {@code timeout} passed. */
  private void asAdmin(String what, Function<RawSession, Code> change, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (true) {
      Optional<Integer> leader = leader();
      if (leader.isPresent()) {
        String address = directAddresses().get(leader.get());
        ClientTls admin = tls("admin");
        try (RawSession session =
            admin == null
                ? new RawSession(address)
                : new RawSession(
                    address,
                    admin.trustedCertificates(),
                    admin.certificateChain(),
                    admin.privateKey())) {
          if (change.apply(session) == Code.OK) {
            return;
          }
        } catch (RuntimeException e) {
          // the leader went away: ask the next one
        }
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("no leader took " + what + " within " + timeout);
      }
      Thread.sleep(200);
    }
  }

  /**
   * Flags added to node {@code i}'s command line from its next start on (for tests that run a node
   * with other settings).
   */
  public synchronized void setExtraArgs(int i, List<String> args) {
    extraArgs.set(i, List.copyOf(args));
  }

  /** The links between the nodes' Raft ports. */
  public PeerNetwork network() {
    return network;
  }

  /**
   * Prepares a node that will join as a new member (a new id, ports and proxy; {@code idem server
   * --join}); start it with {@link #start}, then add it with {@link #changeMembers}. Returns its
   * index.
   */
  public synchronized int addJoiner() {
    return newSlot(true);
  }

  /** Node {@code i} as a member: its id, raft address and advertised (proxy) client address. */
  public ClusterStatus.Member member(int i) {
    return new ClusterStatus.Member(ids.get(i), raftAddresses.get(i), proxies.get(i).address());
  }

  /**
   * Changes the members through the leader (the ChangeMembers RPC, as {@code idem member} does),
   * asking the running nodes directly, not through their proxies; waits up to {@code timeout}.
   *
   * @throws IllegalStateException if the change did not commit
   */
  public ClusterStatus.Member[] changeMembers(
      List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    List<String> live = new ArrayList<>();
    for (int i = 0; i < size(); i++) {
      if (isRunning(i)) {
        live.add(listenAddresses.get(i));
      }
    }
    MembershipChange c;
    try (IdemClient client =
        IdemClient.builder()
            .servers(String.join(",", live))
            .requestTimeout(Duration.ofSeconds(5))
            .tls(tls("admin"))
            .build()) {
      c = client.changeMembers(add, remove, timeout);
    }
    if (!c.committed()) {
      throw new IllegalStateException(
          "membership change (add " + add + ", remove " + remove + ") failed: " + c.message());
    }
    changed(add, remove);
    return c.members().toArray(new ClusterStatus.Member[0]);
  }

  /** Notes a committed change in the slots. */
  private synchronized void changed(List<ClusterStatus.Member> add, List<String> remove) {
    for (ClusterStatus.Member m : add) {
      int i = ids.indexOf(m.id());
      if (i >= 0) {
        members.set(i, true);
      }
    }
    for (String id : remove) {
      int i = ids.indexOf(id);
      if (i >= 0) {
        removed.set(i, true);
        members.set(i, false);
      }
    }
  }

  /** Whether node {@code i} was removed from the members (by {@link #changeMembers}). */
  public synchronized boolean isRemoved(int i) {
    return removed.get(i);
  }

  /**
   * The lost-disk procedure on node {@code i}: kill -9, delete its data directory, start an empty
   * node in its slot under a new id (new ports and proxy: {@code idem server --join}), add it, and
   * once that committed remove the old id. Returns the new id.
   *
   * @throws IllegalStateException if a change did not commit within {@code timeout}
   */
  public String replaceWiped(int i, Duration timeout) {
    String old;
    synchronized (this) {
      old = ids.get(i);
      kill(i);
      deleteTree(dir.resolve(old));
      proxies.get(i).close();
      dropStatusChannel(i);
      String listen = "127.0.0.1:" + freePort();
      String raft = "127.0.0.1:" + freePort();
      ids.set(i, "n" + ++lastId);
      listenAddresses.set(i, listen);
      raftAddresses.set(i, raft);
      proxies.set(i, FaultProxy.start(listen));
      network.retarget(i, raft);
      joiners.set(i, true);
      members.set(i, false);
      start(i);
    }
    awaitAnswering(i, timeout);
    // The old member's data is gone: until the new one is added, the members count a node that
    // will never answer. So each change is tried again, as an operator would, while faults or a
    // slow machine keep it from committing.
    changeMembersPatiently(List.of(member(i)), List.of(), timeout);
    changeMembersPatiently(List.of(), List.of(old), timeout);
    return ids.get(i);
  }

  private static final int CHANGE_ATTEMPTS = 5;

  /** Whether the leader's configuration has every added member voting and no removed one. */
  private boolean changeHolds(List<ClusterStatus.Member> add, List<String> remove) {
    Optional<StatusReply> s = leader().flatMap(this::status);
    if (s.isEmpty()) {
      return false;
    }
    List<String> voters =
        s.get().getMembersList().stream()
            .filter(io.idem.proto.Member::getVoter)
            .map(io.idem.proto.Member::getId)
            .toList();
    return add.stream().allMatch(m -> voters.contains(m.id()))
        && remove.stream().noneMatch(voters::contains);
  }

  private void changeMembersPatiently(
      List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    for (int attempt = 1; ; attempt++) {
      try {
        changeMembers(add, remove, timeout);
        return;
      } catch (IllegalStateException e) {
        if (changeHolds(add, remove)) {
          changed(add, remove); // it committed, and only its answer was lost
          return;
        }
        if (attempt == CHANGE_ATTEMPTS) {
          throw new IllegalStateException(
              e.getMessage() + " (" + CHANGE_ATTEMPTS + " attempts)", e);
        }
        sleep(1_000, "a membership change");
      }
    }
  }

  /**
   * Restarts every running member, one at a time, so that each reads a peer list that names the
   * {@link PeerNetwork} links again. A member added at runtime (a joiner, or a replaced node) is
   * known to the nodes that were running at the change by the address in the configuration entry,
   * its own Raft port, and the joiner itself knows the others by the leader's addresses: Ratis
   * keeps one address per peer id, learnt from the configuration, until the node restarts with a
   * peer list (see {@link PeerNetwork}). Each node is killed, started and awaited until it applied
   * what the others had committed before it went down, so that a majority stays up throughout.
   *
   * @throws IllegalStateException if a node does not catch up within {@code timeout}
   */
  public void relink(Duration timeout) {
    for (int i = 0; i < size(); i++) {
      synchronized (this) {
        if (!members.get(i) || !isRunning(i)) {
          continue;
        }
      }
      long committed = 0;
      for (int j = 0; j < size(); j++) {
        if (j != i && isRunning(j)) {
          committed = Math.max(committed, status(j).map(StatusReply::getAppliedIndex).orElse(0L));
        }
      }
      synchronized (this) {
        kill(i);
        start(i);
      }
      long target = committed;
      long deadline = System.nanoTime() + timeout.toNanos();
      while (status(i).map(StatusReply::getAppliedIndex).orElse(-1L) < target) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException(
              id(i) + " did not apply index " + target + " within " + timeout + " after a restart");
        }
        sleep(100, id(i));
      }
    }
  }

  /**
   * Waits until node {@code i} answers Status (a new process takes seconds to listen on a loaded
   * machine, and the leader refuses to add a node that does not answer).
   *
   * @throws IllegalStateException if it does not answer within {@code timeout}
   */
  public void awaitAnswering(int i, Duration timeout) {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (status(i).isEmpty()) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException(id(i) + " did not answer within " + timeout);
      }
      sleep(100, id(i));
    }
  }

  private static void sleep(long ms, String waitingFor) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted waiting for " + waitingFor, e);
    }
  }

  /** Starts every node. */
  public void startAll() {
    for (int i = 0; i < size(); i++) {
      start(i);
    }
  }

  /** Starts node {@code i} (a fresh process over its data directory). */
  public synchronized void start(int i) {
    if (processes.get(i) != null && processes.get(i).isAlive()) {
      throw new IllegalStateException(ids.get(i) + " is running");
    }
    if (removed.get(i)) {
      throw new IllegalStateException(ids.get(i) + " was removed from the members");
    }
    List<String> args =
        new ArrayList<>(
            List.of(
                "--id",
                ids.get(i),
                "--data-dir",
                dir.resolve(ids.get(i)).toString(),
                "--client-listen",
                listenAddresses.get(i),
                "--snapshot-every",
                Integer.toString(snapshotEvery),
                "--log-segment-bytes",
                Integer.toString(LOG_SEGMENT_BYTES)));
    if (joiners.get(i) && !members.get(i)) {
      args.addAll(
          List.of(
              "--join",
              "--raft-address",
              raftAddresses.get(i),
              "--client-address",
              proxies.get(i).address()));
    } else {
      args.addAll(List.of("--peers", peers(i)));
    }
    args.addAll(securityArgs());
    args.addAll(extraArgs.get(i));
    processes.set(
        i,
        launch(
            List.of("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Xmx512m"),
            LabNode.class.getName(),
            args,
            dir.resolve(ids.get(i) + ".log")));
    paused.set(i, false);
  }

  /**
   * Starts {@code mainClass} in a new JVM of this JVM's Java and class path, its output appended to
   * {@code log}.
   */
  static Process launch(List<String> jvmFlags, String mainClass, List<String> args, Path log) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(jvmFlags);
    cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), mainClass));
    cmd.addAll(args);
    try {
      return new ProcessBuilder(cmd)
          .redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
          .start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + mainClass + " (log " + log + ")", e);
    }
  }

  /** SIGKILL: the process dies at once, its data directory stays. */
  public synchronized void kill(int i) {
    Process p = processes.get(i);
    if (p == null) {
      return;
    }
    if (paused.get(i)) {
      signal(p, "CONT"); // a stopped process still dies of SIGKILL, but resume it for clarity
    }
    p.destroyForcibly();
    try {
      if (!p.waitFor(10, TimeUnit.SECONDS)) {
        throw new IllegalStateException(ids.get(i) + " did not die of SIGKILL in 10 s");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    processes.set(i, null);
    paused.set(i, false);
  }

  /** SIGSTOP: the process freezes (no heartbeats, no answers) until {@link #resume}. */
  public synchronized void pause(int i) {
    if (processes.get(i) != null && !paused.get(i)) {
      signal(processes.get(i), "STOP");
      paused.set(i, true);
    }
  }

  /** SIGCONT. */
  public synchronized void resume(int i) {
    if (processes.get(i) != null && paused.get(i)) {
      signal(processes.get(i), "CONT");
      paused.set(i, false);
    }
  }

  /**
   * Kills node {@code i} and deletes its data. Raft assumes a node keeps its log, so bring it back
   * only once the others elected a leader without it (see {@code Nemesis}): then the new leader
   * probes it afresh and it rejoins by snapshot install.
   */
  public synchronized void wipe(int i) {
    kill(i);
    deleteTree(dir.resolve(ids.get(i)));
  }

  /** The proxy in front of node {@code i}'s client endpoint. */
  public synchronized FaultProxy proxy(int i) {
    return proxies.get(i);
  }

  public synchronized boolean isRunning(int i) {
    return processes.get(i) != null && processes.get(i).isAlive() && !paused.get(i);
  }

  /** The number of slots, removed nodes' included. */
  public synchronized int size() {
    return processes.size();
  }

  /** The process id of node {@code i}, if it runs. */
  public synchronized Optional<Long> pid(int i) {
    Process p = processes.get(i);
    return p == null ? Optional.empty() : Optional.of(p.pid());
  }

  public synchronized String id(int i) {
    return ids.get(i);
  }

  /** The nodes' own client addresses, bypassing the proxies (for observers the faults spare). */
  public synchronized List<String> directAddresses() {
    return List.copyOf(listenAddresses);
  }

  /** Where clients connect: the proxies. */
  public synchronized List<String> clientAddresses() {
    return proxies.stream().map(FaultProxy::address).toList();
  }

  /**
   * The status of node {@code i} (asked directly, not through its proxy), if it answers in 1 s. The
   * channel to each node is kept while it answers and replaced after a failure, so that a poll
   * costs no connection and HTTP/2 handshake inside its 1 s on a loaded machine.
   */
  public Optional<StatusReply> status(int i) {
    ManagedChannel ch = statusChannel(i);
    try {
      return Optional.of(
          IdemGrpc.newBlockingStub(ch)
              .withDeadlineAfter(1, TimeUnit.SECONDS)
              .status(StatusRequest.getDefaultInstance()));
    } catch (RuntimeException e) {
      dropStatusChannel(i, ch);
      return Optional.empty();
    }
  }

  private synchronized ManagedChannel statusChannel(int i) {
    if (statusChannels.get(i) == null) {
      String a = listenAddresses.get(i);
      int colon = a.lastIndexOf(':');
      NettyChannelBuilder b =
          NettyChannelBuilder.forAddress(
              a.substring(0, colon), Integer.parseInt(a.substring(colon + 1)));
      if (certs == null) {
        b.usePlaintext();
      } else {
        try {
          b.sslContext(
              GrpcSslContexts.forClient()
                  .trustManager(certs.certificate("ca").toFile())
                  .keyManager(certs.certificate("admin").toFile(), certs.key("admin").toFile())
                  .build());
        } catch (javax.net.ssl.SSLException e) {
          throw new IllegalStateException("cannot use the test certificates", e);
        }
      }
      statusChannels.set(i, b.build());
    }
    return statusChannels.get(i);
  }

  private synchronized void dropStatusChannel(int i, ManagedChannel ch) {
    if (statusChannels.get(i) == ch) {
      statusChannels.set(i, null);
    }
    ch.shutdownNow();
  }

  /** Closes node {@code i}'s status channel (its address changes). */
  private synchronized void dropStatusChannel(int i) {
    ManagedChannel ch = statusChannels.get(i);
    if (ch != null) {
      dropStatusChannel(i, ch);
    }
  }

  /** The node that says it leads, if one answers. */
  public Optional<Integer> leader() {
    for (int i = 0; i < size(); i++) {
      if (isRunning(i)) {
        Optional<StatusReply> s = status(i);
        if (s.isPresent() && s.get().getRole().equals("LEADER")) {
          return Optional.of(i);
        }
      }
    }
    return Optional.empty();
  }

  @Override
  public synchronized void close() {
    for (int i = 0; i < processes.size(); i++) {
      kill(i);
    }
    proxies.forEach(FaultProxy::close);
    network.close();
    for (int i = 0; i < statusChannels.size(); i++) {
      dropStatusChannel(i);
    }
  }

  /** Sends {@code signal} (STOP, CONT, ...) to {@code p} with kill(1). */
  static void signal(Process p, String signal) {
    try {
      Process k = new ProcessBuilder("kill", "-" + signal, Long.toString(p.pid())).start();
      if (!k.waitFor(5, TimeUnit.SECONDS) || k.exitValue() != 0) {
        throw new IllegalStateException("kill -" + signal + " " + p.pid() + " failed");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static void deleteTree(Path root) {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static int freePort() {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
