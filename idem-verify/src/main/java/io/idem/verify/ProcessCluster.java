package io.idem.verify;

import io.grpc.ManagedChannel;
import io.idem.client.ClientTls;
import io.idem.client.ClusterStatus;
import io.idem.client.IdemClient;
import io.idem.client.MembershipChange;
import io.idem.proto.IdemGrpc;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.TestCertificates;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
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
  // slot takes the new member (a new Node: a new id, new ports, a new proxy), and a removed node's
  // slot stays, stopped, with removed set.
  private final List<Node> nodes = new ArrayList<>();
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
  /** The data groups the nodes run with ({@code --groups}). */
  private int groups = 1;

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
    Node node = new Node("n" + ++lastId, joiner, List.of());
    nodes.add(node);
    network.add(node.raftAddress);
    return nodes.size() - 1;
  }

  /**
   * Node {@code i}'s peer list: every member (and itself), each as the node binds its own Raft port
   * and reaches node j through the link i -> j; every node names the same client address (the
   * client proxy) for a node.
   */
  private String peers(int i) {
    List<String> specs = new ArrayList<>();
    for (int j = 0; j < nodes.size(); j++) {
      Node n = nodes.get(j);
      if (j == i || n.member) {
        String r = i == j ? n.raftAddress : network.raftAddressSeenBy(i, j);
        specs.add(n.id + "=" + r + ":" + port(n.proxy.address()));
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
   * #clientTls()}; call {@link ClusterAdmin#grantClients} once a leader is up.
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

  /** Changes of the replicated configuration and of the access control, through the leader. */
  public ClusterAdmin admin() {
    return new ClusterAdmin(this);
  }

  /**
   * Flags added to node {@code i}'s command line from its next start on (for tests that run a node
   * with other settings).
   */
  public synchronized void setExtraArgs(int i, List<String> args) {
    nodes.get(i).extraArgs = List.copyOf(args);
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
  public synchronized ClusterStatus.Member member(int i) {
    return nodes.get(i).asMember();
  }

  /**
   * Changes the members through the leader (the ChangeMembers RPC, as {@code idem member} does),
   * asking the running nodes directly, not through their proxies; waits up to {@code timeout}.
   *
   * @throws IllegalStateException if the change did not commit
   */
  public ClusterStatus.Member[] changeMembers(
      List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    return changeMembers(-1, add, remove, timeout);
  }

  /**
   * Changes the members of group {@code group} of a cluster of several ({@code idem group move}'s
   * call), or of the cluster ({@code group} -1), as {@link #changeMembers(List, List, Duration)}.
   *
   * @throws IllegalStateException if the change did not commit
   */
  public ClusterStatus.Member[] changeMembers(
      int group, List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    MembershipChange c;
    try (IdemClient client = adminClient()) {
      c =
          group < 0
              ? client.changeMembers(add, remove, timeout)
              : client.changeMembers(group, add, remove, timeout);
    }
    if (!c.committed()) {
      throw new IllegalStateException(
          "membership change"
              + (group < 0 ? "" : " of group " + group)
              + " (add "
              + add
              + ", remove "
              + remove
              + ") failed: "
              + c.message());
    }
    changed(add, remove);
    return c.members().toArray(new ClusterStatus.Member[0]);
  }

  /**
   * A client of the running nodes, asked directly (not through their proxies), as the admin under
   * TLS, with a 5 s request timeout.
   */
  private IdemClient adminClient() {
    List<String> live = new ArrayList<>();
    for (int i = 0; i < size(); i++) {
      if (isRunning(i)) {
        live.add(listenAddress(i));
      }
    }
    return IdemClient.builder()
        .servers(String.join(",", live))
        .requestTimeout(Duration.ofSeconds(5))
        .tls(tls("admin"))
        .build();
  }

  /** Notes a committed change in the slots. */
  private synchronized void changed(List<ClusterStatus.Member> add, List<String> remove) {
    for (Node n : nodes) {
      if (add.stream().anyMatch(m -> m.id().equals(n.id))) {
        n.member = true;
      }
      if (remove.contains(n.id)) {
        n.removed = true;
        n.member = false;
      }
    }
  }

  /** Whether node {@code i} was removed from the members (by {@link #changeMembers}). */
  public synchronized boolean isRemoved(int i) {
    return nodes.get(i).removed;
  }

  /**
   * The lost-disk procedure on node {@code i}: kill -9, delete its data directory, start an empty
   * node in its slot under a new id (new ports and proxy: {@code idem server --join}), add it, and
   * once that committed remove the old id. Returns the new id. In a cluster of several groups every
   * group moves its replica from the old id to the new one in turn ({@code idem group move}), while
   * the others serve: the new id joins the metadata group first and the old one leaves it last.
   *
   * @throws IllegalStateException if a change did not commit within {@code timeout}
   */
  public String replaceWiped(int i, Duration timeout) {
    String old;
    synchronized (this) {
      Node gone = nodes.get(i);
      old = gone.id;
      kill(i);
      deleteTree(dir.resolve(old));
      gone.proxy.close();
      gone.dropStatusChannel();
      Node fresh = new Node("n" + ++lastId, true, gone.extraArgs);
      nodes.set(i, fresh);
      network.retarget(i, fresh.raftAddress);
      start(i);
    }
    // A new JVM hosting every group starts slowly on a machine the campaign loads: waiting longer
    // than a change may take here costs nothing, and a replacement given up half-way leaves its
    // groups on a dead member for the rest of the run.
    awaitAnswering(i, timeout.multipliedBy(3));
    // The old member's data is gone: until the new one is added, the members count a node that
    // will never answer. So each change is tried again, as an operator would, while faults or a
    // slow machine keep it from committing.
    if (groups == 1) {
      changeMembersPatiently(-1, List.of(member(i)), List.of(), timeout);
      changeMembersPatiently(-1, List.of(), List.of(old), timeout);
    } else {
      // The metadata group first in, last out: a data group's members must be members of it.
      changeMembersPatiently(0, List.of(member(i)), List.of(), timeout);
      for (int g = 1; g <= groups; g++) {
        changeMembersPatiently(g, List.of(member(i)), List.of(), timeout);
        changeMembersPatiently(g, List.of(), List.of(old), timeout);
      }
      changeMembersPatiently(0, List.of(), List.of(old), timeout);
    }
    return id(i);
  }

  private static final int CHANGE_ATTEMPTS = 5;

  /**
   * Whether the leader's configuration (of group {@code group}, -1: the cluster's) has every added
   * member voting and no removed one.
   */
  private boolean changeHolds(int group, List<ClusterStatus.Member> add, List<String> remove) {
    List<String> voters;
    if (group < 0) {
      Optional<StatusReply> s = leader().flatMap(this::status);
      if (s.isEmpty()) {
        return false;
      }
      voters =
          s.get().getMembersList().stream()
              .filter(io.idem.proto.Member::getVoter)
              .map(io.idem.proto.Member::getId)
              .toList();
    } else {
      try (IdemClient client = adminClient()) {
        voters =
            client.status(group).members().stream()
                .filter(ClusterStatus.Member::voter)
                .map(ClusterStatus.Member::id)
                .toList();
      } catch (RuntimeException e) {
        return false;
      }
    }
    return add.stream().allMatch(m -> voters.contains(m.id()))
        && remove.stream().noneMatch(voters::contains);
  }

  private void changeMembersPatiently(
      int group, List<ClusterStatus.Member> add, List<String> remove, Duration timeout) {
    for (int attempt = 1; ; attempt++) {
      try {
        changeMembers(group, add, remove, timeout);
        return;
      } catch (IllegalStateException | io.idem.client.IdemException e) {
        // Refused, not committed in time, or no leader answered in time (a fault or an election
        // under way): tried again, as an operator would.
        if (changeHolds(group, add, remove)) {
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
        if (!nodes.get(i).member || !isRunning(i)) {
          continue;
        }
      }
      // Every group's (-1: the cluster's one group), so that no group is left on a bare majority
      // when the next member goes down.
      List<Integer> groupsHere = new ArrayList<>();
      if (groups == 1) {
        groupsHere.add(-1);
      } else {
        for (int g = 0; g <= groups; g++) {
          groupsHere.add(g);
        }
      }
      Map<Integer, Long> committed = new HashMap<>();
      for (int g : groupsHere) {
        for (int j = 0; j < size(); j++) {
          if (j != i && isRunning(j)) {
            committed.merge(
                g, status(j, g).map(StatusReply::getAppliedIndex).orElse(0L), Math::max);
          }
        }
      }
      synchronized (this) {
        kill(i);
        start(i);
      }
      long deadline = System.nanoTime() + timeout.toNanos();
      for (int g : groupsHere) {
        long target = committed.get(g);
        while (status(i, g).map(StatusReply::getAppliedIndex).orElse(-1L) < target) {
          if (System.nanoTime() > deadline) {
            throw new IllegalStateException(
                id(i)
                    + " did not apply index "
                    + target
                    + (g < 0 ? "" : " of group " + g)
                    + " within "
                    + timeout
                    + " after a restart");
          }
          sleep(100, id(i));
        }
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
    Node n = nodes.get(i);
    if (n.process != null && n.process.isAlive()) {
      throw new IllegalStateException(n.id + " is running");
    }
    if (n.removed) {
      throw new IllegalStateException(n.id + " was removed from the members");
    }
    List<String> args =
        new ArrayList<>(
            List.of(
                "--id",
                n.id,
                "--data-dir",
                dir.resolve(n.id).toString(),
                "--client-listen",
                n.listenAddress,
                "--snapshot-every",
                Integer.toString(snapshotEvery),
                "--log-segment-bytes",
                Integer.toString(LOG_SEGMENT_BYTES)));
    if (groups > 1) {
      args.addAll(List.of("--groups", Integer.toString(groups)));
    }
    if (n.joiner && !n.member) {
      args.addAll(
          List.of(
              "--join", "--raft-address", n.raftAddress, "--client-address", n.proxy.address()));
    } else {
      args.addAll(List.of("--peers", peers(i)));
    }
    args.addAll(securityArgs());
    args.addAll(n.extraArgs);
    n.process =
        launch(
            List.of("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Xmx512m"),
            LabNode.class.getName(),
            args,
            dir.resolve(n.id + ".log"));
    n.paused = false;
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
    nodes.get(i).kill();
  }

  /** SIGSTOP: the process freezes (no heartbeats, no answers) until {@link #resume}. */
  public synchronized void pause(int i) {
    nodes.get(i).pause();
  }

  /** SIGCONT. */
  public synchronized void resume(int i) {
    nodes.get(i).resume();
  }

  /**
   * Kills node {@code i} and deletes its data. Raft assumes a node keeps its log, so bring it back
   * only once the others elected a leader without it (see {@code Nemesis}): then the new leader
   * probes it afresh and it rejoins by snapshot install.
   */
  public synchronized void wipe(int i) {
    kill(i);
    deleteTree(dir.resolve(id(i)));
  }

  /** The proxy in front of node {@code i}'s client endpoint. */
  public synchronized FaultProxy proxy(int i) {
    return nodes.get(i).proxy;
  }

  public synchronized boolean isRunning(int i) {
    return nodes.get(i).isRunning();
  }

  /** The number of slots, removed nodes' included. */
  public synchronized int size() {
    return nodes.size();
  }

  /** The process id of node {@code i}, if it runs. */
  public synchronized Optional<Long> pid(int i) {
    return nodes.get(i).pid();
  }

  public synchronized String id(int i) {
    return nodes.get(i).id;
  }

  private synchronized String listenAddress(int i) {
    return nodes.get(i).listenAddress;
  }

  /** The nodes' own client addresses, bypassing the proxies (for observers the faults spare). */
  public synchronized List<String> directAddresses() {
    return nodes.stream().map(n -> n.listenAddress).toList();
  }

  /** Where clients connect: the proxies. */
  public synchronized List<String> clientAddresses() {
    return nodes.stream().map(n -> n.proxy.address()).toList();
  }

  /**
   * The status of node {@code i} (asked directly, not through its proxy), if it answers in 1 s. The
   * channel to each node is kept while it answers and replaced after a failure, so that a poll
   * costs no connection and HTTP/2 handshake inside its 1 s on a loaded machine.
   */
  public Optional<StatusReply> status(int i) {
    return status(i, -1);
  }

  /**
   * Node {@code i}'s status as Raft group {@code group} sees it (-1: no group named, group 1), if
   * it answers within a second.
   */
  public Optional<StatusReply> status(int i, int group) {
    ManagedChannel ch = statusChannel(i);
    try {
      IdemGrpc.IdemBlockingStub stub = IdemGrpc.newBlockingStub(ch);
      if (group >= 0) {
        stub = stub.withInterceptors(io.idem.proto.GroupHeader.naming(group));
      }
      return Optional.of(
          stub.withDeadlineAfter(1, TimeUnit.SECONDS).status(StatusRequest.getDefaultInstance()));
    } catch (RuntimeException e) {
      dropStatusChannel(i, ch);
      return Optional.empty();
    }
  }

  /**
   * Runs the nodes with {@code n} data groups ({@code --groups}); 1 (the default): a cluster of one
   * group. Before the first start.
   */
  public synchronized ProcessCluster groups(int n) {
    this.groups = n;
    return this;
  }

  /** The number of data groups the nodes run with. */
  public synchronized int groups() {
    return groups;
  }

  private synchronized ManagedChannel statusChannel(int i) {
    return nodes.get(i).statusChannel(certs);
  }

  private synchronized void dropStatusChannel(int i, ManagedChannel ch) {
    nodes.get(i).dropStatusChannel(ch);
  }

  /** The node that says it leads, if one answers. */
  public Optional<Integer> leader() {
    return leader(-1);
  }

  /** The running node that says it leads group {@code group} (-1: none named), if one answers. */
  public Optional<Integer> leader(int group) {
    for (int i = 0; i < size(); i++) {
      if (isRunning(i) && status(i, group).filter(s -> s.getRole().equals("LEADER")).isPresent()) {
        return Optional.of(i);
      }
    }
    return Optional.empty();
  }

  @Override
  public synchronized void close() {
    nodes.forEach(Node::kill);
    nodes.forEach(n -> n.proxy.close());
    network.close();
    nodes.forEach(Node::dropStatusChannel);
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
}
