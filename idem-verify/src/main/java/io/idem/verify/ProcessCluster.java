package io.idem.verify;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.idem.proto.IdemGrpc;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import io.idem.testkit.FaultProxy;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
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
 * nodes, each node's peer list naming its own links), so that the peers can be partitioned. Nodes
 * snapshot every {@value #SNAPSHOT_EVERY} entries in small log segments, so that their logs are
 * purged and a wiped node comes back through snapshot install.
 */
public final class ProcessCluster implements AutoCloseable {
  static final int SNAPSHOT_EVERY = 2_000;
  private static final int LOG_SEGMENT_BYTES = 64 << 10;

  private final Path dir;
  private final List<String> ids = new ArrayList<>();
  private final List<String> listenAddresses = new ArrayList<>();
  private final List<FaultProxy> proxies = new ArrayList<>();
  private final List<String> peers = new ArrayList<>();
  private final PeerNetwork network;
  private final List<List<String>> extraArgs = new ArrayList<>();
  private final Process[] processes;
  private final boolean[] paused;
  private final ManagedChannel[] statusChannels;

  /** Chooses free loopback ports for {@code n} nodes and starts their proxies; starts no node. */
  public ProcessCluster(Path dir, int n) {
    this.dir = dir;
    try {
      Files.createDirectories(dir);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create " + dir, e);
    }
    this.processes = new Process[n];
    this.paused = new boolean[n];
    this.statusChannels = new ManagedChannel[n];
    List<String> raft = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String listen = "127.0.0.1:" + freePort();
      ids.add("n" + (i + 1));
      listenAddresses.add(listen);
      proxies.add(FaultProxy.start(listen));
      raft.add("127.0.0.1:" + freePort());
      extraArgs.add(List.of());
    }
    this.network = new PeerNetwork(raft);
    for (int i = 0; i < n; i++) {
      // Node i binds its own Raft port and reaches node j through the link i -> j; every node
      // names the same client address (the client proxy) for a node.
      List<String> specs = new ArrayList<>();
      for (int j = 0; j < n; j++) {
        String r = i == j ? raft.get(j) : network.raftAddressSeenBy(i, j);
        specs.add(ids.get(j) + "=" + r + ":" + port(proxies.get(j).address()));
      }
      peers.add(String.join(",", specs));
    }
  }

  private static String port(String address) {
    return address.substring(address.lastIndexOf(':') + 1);
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

  /** Starts every node. */
  public void startAll() {
    for (int i = 0; i < processes.length; i++) {
      start(i);
    }
  }

  /** Starts node {@code i} (a fresh process over its data directory). */
  public synchronized void start(int i) {
    if (processes[i] != null && processes[i].isAlive()) {
      throw new IllegalStateException(ids.get(i) + " is running");
    }
    List<String> args =
        new ArrayList<>(
            List.of(
                "--id",
                ids.get(i),
                "--data-dir",
                dir.resolve(ids.get(i)).toString(),
                "--peers",
                peers.get(i),
                "--client-listen",
                listenAddresses.get(i),
                "--snapshot-every",
                Integer.toString(SNAPSHOT_EVERY),
                "--log-segment-bytes",
                Integer.toString(LOG_SEGMENT_BYTES)));
    args.addAll(extraArgs.get(i));
    processes[i] =
        launch(
            List.of("-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Xmx512m"),
            "io.idem.server.Main",
            args,
            dir.resolve(ids.get(i) + ".log"));
    paused[i] = false;
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
    Process p = processes[i];
    if (p == null) {
      return;
    }
    if (paused[i]) {
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
    processes[i] = null;
    paused[i] = false;
  }

  /** SIGSTOP: the process freezes (no heartbeats, no answers) until {@link #resume}. */
  public synchronized void pause(int i) {
    if (processes[i] != null && !paused[i]) {
      signal(processes[i], "STOP");
      paused[i] = true;
    }
  }

  /** SIGCONT. */
  public synchronized void resume(int i) {
    if (processes[i] != null && paused[i]) {
      signal(processes[i], "CONT");
      paused[i] = false;
    }
  }

  /**
   * Kills node {@code i} and deletes its data. Raft assumes a node keeps its log, so bring it back
   * only once the others elected a leader without it (see {@code Campaign}): then the new leader
   * probes it afresh and it rejoins by snapshot install.
   */
  public synchronized void wipe(int i) {
    kill(i);
    deleteTree(dir.resolve(ids.get(i)));
  }

  /** The proxy in front of node {@code i}'s client endpoint. */
  public FaultProxy proxy(int i) {
    return proxies.get(i);
  }

  public synchronized boolean isRunning(int i) {
    return processes[i] != null && processes[i].isAlive() && !paused[i];
  }

  public int size() {
    return processes.length;
  }

  public String id(int i) {
    return ids.get(i);
  }

  /** The nodes' own client addresses, bypassing the proxies (for observers the faults spare). */
  public List<String> directAddresses() {
    return List.copyOf(listenAddresses);
  }

  /** Where clients connect: the proxies. */
  public List<String> clientAddresses() {
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
    if (statusChannels[i] == null) {
      String a = listenAddresses.get(i);
      int colon = a.lastIndexOf(':');
      statusChannels[i] =
          NettyChannelBuilder.forAddress(
                  a.substring(0, colon), Integer.parseInt(a.substring(colon + 1)))
              .usePlaintext()
              .build();
    }
    return statusChannels[i];
  }

  private synchronized void dropStatusChannel(int i, ManagedChannel ch) {
    if (statusChannels[i] == ch) {
      statusChannels[i] = null;
    }
    ch.shutdownNow();
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
    for (int i = 0; i < processes.length; i++) {
      kill(i);
    }
    proxies.forEach(FaultProxy::close);
    network.close();
    for (int i = 0; i < statusChannels.length; i++) {
      if (statusChannels[i] != null) {
        statusChannels[i].shutdownNow();
        statusChannels[i] = null;
      }
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
