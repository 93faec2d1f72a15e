package io.idem.testkit.stores;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * A private Redis Cluster for tests and the keys campaign: six {@code redis-server} processes
 * ({@link RedisServer}, {@code cluster-enabled yes}) on free loopback ports, three masters with one
 * replica each, created with {@code redis-cli --cluster create ... --cluster-replicas 1}. {@link
 * #start} returns once every live node reports {@code cluster_state:ok} and all agree on which
 * master serves which slots.
 *
 * <p>Faults: {@link #kill} (SIGKILL; a master's replica takes over after {@link #NODE_TIMEOUT}, and
 * what it had not yet received is lost: replication is asynchronous), {@link #restart} (a killed
 * master comes back as a replica of its successor), {@link #failover} ({@code CLUSTER FAILOVER} on
 * a replica: no write is lost) and {@link #moveSlot} (resharding one slot between masters with
 * {@code SETSLOT IMPORTING/MIGRATING}, {@code MIGRATE} and {@code SETSLOT NODE}, as {@code
 * redis-cli --cluster reshard} does; clients meanwhile get ASK and TRYAGAIN). Every process is
 * stopped by its PID in {@link #close()}. Commands go through {@code redis-cli} (Debian package
 * redis-tools, a dependency of redis-server). Not thread-safe: one owner drives the faults; clients
 * may use the cluster from any thread meanwhile.
 */
public final class RedisCluster implements AutoCloseable {

  /** Masters in the cluster. */
  public static final int MASTERS = 3;

  /** Nodes: each master with one replica. */
  public static final int NODES = 2 * MASTERS;

  /**
   * {@code cluster-node-timeout}: how long a master may be unreachable before its replica takes
   * over. Short for tests, long enough that a loaded 2-core machine does not fail over by itself.
   */
  public static final Duration NODE_TIMEOUT = Duration.ofSeconds(3);

  /** How long {@link #start} and the waits after a fault take at most. */
  public static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(60);

  /** Redis Cluster's slots. */
  public static final int SLOTS = 16384;

  /** The range ports are drawn from: below the ephemeral range, with the bus port (+10000) too. */
  private static final int PORT_LOW = 12000;

  private static final int PORT_SPAN = 10000;
  private static final int BUS_OFFSET = 10000;
  private static final String CLI = "redis-cli";

  private final Map<Integer, RedisServer> nodes = new LinkedHashMap<>();

  private RedisCluster() {}

  /**
   * Starts six nodes with their data under {@code dir}, creates the cluster and waits until it is
   * healthy.
   *
   * @param aof what each node's AOF does ({@link RedisServer.Aof#OFF}: Redis's default)
   * @throws IllegalStateException if a node does not start or the cluster does not settle in {@link
   *     #SETTLE_TIMEOUT} (then every node is stopped)
   */
  public static RedisCluster start(Path dir, RedisServer.Aof aof) {
    RedisCluster c = new RedisCluster();
    try {
      for (int port : freePorts(NODES)) {
        List<String> args =
            List.of(
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                Long.toString(NODE_TIMEOUT.toMillis()),
                // A replica takes over however long it was cut off: tests kill masters at will.
                "--cluster-replica-validity-factor",
                "0");
        c.nodes.put(
            port,
            RedisServer.start(
                RedisServer.DEFAULT_BINARY, dir.resolve("n" + port), port, aof, args));
      }
      List<String> create = new ArrayList<>(List.of("--cluster", "create"));
      for (int port : c.nodes.keySet()) {
        create.add("127.0.0.1:" + port);
      }
      create.addAll(List.of("--cluster-replicas", "1", "--cluster-yes"));
      String out = run(Duration.ofSeconds(60), create);
      if (!out.contains("[OK] All 16384 slots covered")) {
        throw new IllegalStateException("redis-cli --cluster create failed:\n" + out);
      }
      c.awaitHealthy();
      return c;
    } catch (RuntimeException e) {
      c.close();
      throw e;
    }
  }

  /** Every node's port, masters and replicas, in start order. */
  public List<Integer> ports() {
    return List.copyOf(nodes.keySet());
  }

  /** {@code redis://127.0.0.1:port} of every node: seeds for a cluster client. */
  public List<String> uris() {
    List<String> out = new ArrayList<>();
    for (int port : nodes.keySet()) {
      out.add("redis://127.0.0.1:" + port);
    }
    return out;
  }

  /** The node on {@code port}. */
  public RedisServer node(int port) {
    RedisServer s = nodes.get(port);
    if (s == null) {
      throw new IllegalArgumentException("no node on port " + port + ": " + nodes.keySet());
    }
    return s;
  }

  /** The hash slot of {@code key} (CRC16 of its hash tag, or of the whole key), as Redis has it. */
  public static int slotOf(String key) {
    byte[] b = key.getBytes(StandardCharsets.UTF_8);
    int from = 0;
    int to = b.length;
    int open = indexOf(b, (byte) '{', 0);
    if (open >= 0) {
      int close = indexOf(b, (byte) '}', open + 1);
      if (close > open + 1) {
        from = open + 1;
        to = close;
      }
    }
    int crc = 0;
    for (int i = from; i < to; i++) {
      crc ^= (b[i] & 0xff) << 8;
      for (int j = 0; j < 8; j++) {
        crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
      }
    }
    return (crc & 0xffff) % SLOTS;
  }

  /** The port of the master that serves {@code slot}, as a live node sees it now. */
  public int masterOf(int slot) {
    for (NodeLine n : view()) {
      if (n.master() && !n.failed() && n.slots().contains(slot)) {
        return n.port();
      }
    }
    throw new IllegalStateException("no live master serves slot " + slot + ":\n" + nodesText());
  }

  /** The ports of the live replicas of the master on {@code masterPort}. */
  public List<Integer> replicasOf(int masterPort) {
    List<NodeLine> view = view();
    String id = null;
    for (NodeLine n : view) {
      if (n.port() == masterPort) {
        id = n.id();
      }
    }
    List<Integer> out = new ArrayList<>();
    for (NodeLine n : view) {
      if (!n.master() && !n.failed() && n.masterId().equals(id) && node(n.port()).isRunning()) {
        out.add(n.port());
      }
    }
    return out;
  }

  /** The live masters' ports. */
  public List<Integer> masters() {
    List<Integer> out = new ArrayList<>();
    for (NodeLine n : view()) {
      if (n.master() && !n.failed() && !n.slots().isEmpty()) {
        out.add(n.port());
      }
    }
    return out;
  }

  /** SIGKILL of the node on {@code port}: nothing is flushed. Returns at once. */
  public void kill(int port) {
    node(port).kill();
  }

  /**
   * SIGSTOP of the node on {@code port}: it stops reading, as a replica on a slow link or a busy
   * host falls behind; its master queues what it sends it. {@link #resume} undoes it.
   */
  public void pause(int port) {
    signal(port, "-STOP");
  }

  /** SIGCONT of a node {@link #pause}d. */
  public void resume(int port) {
    signal(port, "-CONT");
  }

  private void signal(int port, String signal) {
    long pid = node(port).pid();
    try {
      Process p = new ProcessBuilder("kill", signal, Long.toString(pid)).start();
      if (!p.waitFor(10, TimeUnit.SECONDS) || p.exitValue() != 0) {
        throw new IllegalStateException("kill " + signal + " " + pid + " failed");
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /**
   * Kills the master serving {@code slot} and waits until one of its replicas serves the slot and
   * the cluster is healthy again.
   *
   * @return the killed master's port
   */
  public int killMasterOf(int slot) {
    int old = masterOf(slot);
    kill(old);
    await(
        "a replica to take over slot " + slot + " from " + old,
        () -> {
          try {
            return masterOf(slot) != old;
          } catch (IllegalStateException e) {
            return false;
          }
        });
    awaitHealthy();
    return old;
  }

  /**
   * Starts a killed node again on its port and data; it rejoins (a failed-over master as a replica
   * of its successor). Waits until the cluster is healthy.
   */
  public void restart(int port) {
    node(port).restart();
    await("node " + port + " to rejoin", () -> !nodeLine(port, port).failed());
    awaitHealthy();
  }

  /**
   * {@code CLUSTER FAILOVER} on the replica on {@code replicaPort}: it catches up with its master,
   * then takes over its slots; no acknowledged write is lost. Waits until it is a master.
   */
  public void failover(int replicaPort) {
    String out = command(replicaPort, "CLUSTER", "FAILOVER");
    if (!out.startsWith("OK")) {
      throw new IllegalStateException("CLUSTER FAILOVER on " + replicaPort + ": " + out);
    }
    await(
        "node " + replicaPort + " to become a master",
        () -> nodeLine(replicaPort, replicaPort).master());
    awaitHealthy();
  }

  /**
   * Moves {@code slot}, with its keys, to the master on {@code targetPort}, as {@code redis-cli
   * --cluster reshard} moves each slot: the target imports, the source migrates, keys go over in
   * batches with {@code MIGRATE}, then every master learns the new owner. Clients keep working
   * meanwhile (ASK for keys already moved, TRYAGAIN for a multi-key command split across the two).
   */
  public void moveSlot(int slot, int targetPort) {
    int source = masterOf(slot);
    if (source == targetPort) {
      return;
    }
    String sourceId = nodeLine(source, source).id();
    String targetId = nodeLine(targetPort, targetPort).id();
    String s = Integer.toString(slot);
    expectOk(command(targetPort, "CLUSTER", "SETSLOT", s, "IMPORTING", sourceId));
    expectOk(command(source, "CLUSTER", "SETSLOT", s, "MIGRATING", targetId));
    for (int round = 0; round < 100_000; round++) {
      String keys = command(source, "CLUSTER", "GETKEYSINSLOT", s, "100");
      if (keys.isBlank()) {
        break;
      }
      List<String> migrate =
          new ArrayList<>(
              List.of("MIGRATE", "127.0.0.1", Integer.toString(targetPort), "", "0", "5000"));
      migrate.add("KEYS");
      migrate.addAll(List.of(keys.split("\n")));
      String out = command(source, migrate.toArray(String[]::new));
      if (!out.startsWith("OK") && !out.startsWith("NOKEY")) {
        throw new IllegalStateException("MIGRATE from " + source + ": " + out);
      }
    }
    expectOk(command(targetPort, "CLUSTER", "SETSLOT", s, "NODE", targetId));
    expectOk(command(source, "CLUSTER", "SETSLOT", s, "NODE", targetId));
    for (int master : masters()) {
      if (master != source && master != targetPort) {
        command(master, "CLUSTER", "SETSLOT", s, "NODE", targetId);
      }
    }
    await("slot " + slot + " to move to " + targetPort, () -> masterOf(slot) == targetPort);
    awaitHealthy();
  }

  /**
   * Waits until every live node reports {@code cluster_state:ok} and all of them see the same
   * masters serving all {@value #SLOTS} slots.
   *
   * @throws IllegalStateException after {@link #SETTLE_TIMEOUT}, with every node's view
   */
  public void awaitHealthy() {
    await("the cluster to settle", this::healthy);
  }

  /**
   * Sends {@code args} as one command to the node on {@code port} and returns its reply as {@code
   * redis-cli} prints it ({@link RespCommand}).
   *
   * @throws UncheckedIOException if the node cannot be reached or does not answer in 10 s
   */
  public String command(int port, String... args) {
    return RespCommand.send(port, args);
  }

  /** Stops every node by its PID (SIGTERM, a bounded wait, then SIGKILL). */
  @Override
  public void close() {
    RuntimeException first = null;
    for (RedisServer s : nodes.values()) {
      try {
        s.close();
      } catch (RuntimeException e) {
        if (first == null) {
          first = e;
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }

  /** Every node's {@code CLUSTER NODES}, for failure messages. */
  public String nodesText() {
    StringBuilder b = new StringBuilder();
    for (Map.Entry<Integer, RedisServer> e : nodes.entrySet()) {
      b.append("node ").append(e.getKey());
      if (!e.getValue().isRunning()) {
        b.append(" (down)\n");
        continue;
      }
      try {
        b.append(":\n").append(command(e.getKey(), "CLUSTER", "NODES")).append('\n');
      } catch (UncheckedIOException x) {
        b.append(": ").append(x.getMessage()).append('\n');
      }
    }
    return b.toString();
  }

  // ---- views ----

  /** One line of CLUSTER NODES. */
  private record NodeLine(
      String id, int port, boolean master, boolean failed, String masterId, Set<Integer> slots) {

    static NodeLine parse(String line) {
      String[] f = line.trim().split(" ");
      String addr = f[1];
      int port = Integer.parseInt(addr.substring(addr.lastIndexOf(':') + 1, addr.indexOf('@')));
      Set<String> flags = Set.of(f[2].split(","));
      Set<Integer> slots = new TreeSet<>();
      for (int i = 8; i < f.length; i++) {
        if (f[i].startsWith("[")) {
          continue; // a slot migrating or importing: still served where it was
        }
        int dash = f[i].indexOf('-');
        int lo = Integer.parseInt(dash < 0 ? f[i] : f[i].substring(0, dash));
        int hi = dash < 0 ? lo : Integer.parseInt(f[i].substring(dash + 1));
        for (int s = lo; s <= hi; s++) {
          slots.add(s);
        }
      }
      return new NodeLine(
          f[0],
          port,
          flags.contains("master"),
          flags.contains("fail") || flags.contains("noaddr"),
          f[3],
          slots);
    }
  }

  /** What the live node on {@code askPort} says of the node on {@code port}. */
  private NodeLine nodeLine(int askPort, int port) {
    for (NodeLine n : view(askPort)) {
      if (n.port() == port) {
        return n;
      }
    }
    throw new IllegalStateException("node " + askPort + " does not know node " + port);
  }

  /** The cluster as the first live node sees it. */
  private List<NodeLine> view() {
    for (Map.Entry<Integer, RedisServer> e : nodes.entrySet()) {
      if (e.getValue().isRunning()) {
        return view(e.getKey());
      }
    }
    throw new IllegalStateException("no node runs");
  }

  private List<NodeLine> view(int port) {
    List<NodeLine> out = new ArrayList<>();
    for (String line : command(port, "CLUSTER", "NODES").split("\n")) {
      if (!line.isBlank()) {
        out.add(NodeLine.parse(line));
      }
    }
    return out;
  }

  /**
   * Every live node says {@code cluster_state:ok}, and all of them see the same thing: which live
   * masters serve which slots (all of them), and which master each live replica follows.
   */
  private boolean healthy() {
    long running = nodes.values().stream().filter(RedisServer::isRunning).count();
    String agreed = null;
    for (Map.Entry<Integer, RedisServer> e : nodes.entrySet()) {
      if (!e.getValue().isRunning()) {
        continue;
      }
      int port = e.getKey();
      if (!command(port, "CLUSTER", "INFO").contains("cluster_state:ok")) {
        return false;
      }
      TreeSet<String> seen = new TreeSet<>();
      Set<Integer> covered = new HashSet<>();
      int live = 0;
      for (NodeLine n : view(port)) {
        if (n.failed()) {
          continue;
        }
        live++;
        if (n.master()) {
          seen.add(n.id() + " serves " + n.slots().size() + ":" + n.slots().hashCode());
          covered.addAll(n.slots());
        } else {
          seen.add(n.id() + " follows " + n.masterId());
        }
      }
      if (covered.size() != SLOTS || live != running) {
        return false;
      }
      if (nodeLine(port, port).master() && !replicasOnline(port)) {
        return false;
      }
      String mine = seen.toString();
      if (agreed == null) {
        agreed = mine;
      } else if (!agreed.equals(mine)) {
        return false;
      }
    }
    return agreed != null;
  }

  /** Whether every replica that follows the master on {@code port} has its link up. */
  private boolean replicasOnline(int port) {
    String info = command(port, "INFO", "replication");
    int online = info.split("state=online", -1).length - 1;
    return online == replicasOf(port).size();
  }

  /**
   * Waits until every live replica of the master on {@code masterPort} has acknowledged all the
   * master has written (its offset in {@code INFO replication} equals {@code master_repl_offset}).
   */
  public void awaitReplicated(int masterPort) {
    await(
        "the replicas of " + masterPort + " to catch up",
        () -> {
          String info = command(masterPort, "INFO", "replication");
          String offset = field(info, "master_repl_offset:");
          int replicas = 0;
          for (String line : info.split("\n")) {
            if (line.startsWith("slave") && line.contains("state=online")) {
              replicas++;
              if (!line.contains("offset=" + offset + ",")) {
                return false;
              }
            }
          }
          return replicas == replicasOf(masterPort).size();
        });
  }

  private static String field(String info, String name) {
    for (String line : info.split("\n")) {
      if (line.startsWith(name)) {
        return line.substring(name.length()).trim();
      }
    }
    return "";
  }

  private void await(String what, BooleanSupplier done) {
    long end = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
    while (true) {
      boolean ok;
      try {
        ok = done.getAsBoolean();
      } catch (RuntimeException e) {
        ok = false; // a node mid-restart answers LOADING, or not at all
      }
      if (ok) {
        return;
      }
      if (System.nanoTime() > end) {
        throw new IllegalStateException(
            "waited " + SETTLE_TIMEOUT + " for " + what + ":\n" + nodesText());
      }
      LocalFiles.sleep(100);
    }
  }

  private static void expectOk(String out) {
    if (!out.startsWith("OK")) {
      throw new IllegalStateException("expected OK, got: " + out);
    }
  }

  private static String run(Duration limit, List<String> args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(CLI);
    cmd.addAll(args);
    Process p;
    try {
      p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    } catch (IOException e) {
      throw new IllegalStateException(
          "cannot run " + CLI + " (Debian package redis-tools): " + e.getMessage(), e);
    }
    try {
      p.getOutputStream().close();
      byte[] out = p.getInputStream().readAllBytes(); // ends when the process exits
      if (!p.waitFor(limit.toMillis(), TimeUnit.MILLISECONDS)) {
        p.destroyForcibly();
        throw new IllegalStateException(String.join(" ", cmd) + " ran over " + limit);
      }
      return new String(out, StandardCharsets.UTF_8).trim();
    } catch (IOException e) {
      p.destroyForcibly();
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      p.destroyForcibly();
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /** {@code n} distinct ports whose cluster bus ports (+10000) are free too. */
  private static List<Integer> freePorts(int n) {
    List<Integer> out = new ArrayList<>();
    for (int tries = 0; out.size() < n && tries < 10_000; tries++) {
      int port = PORT_LOW + ThreadLocalRandom.current().nextInt(PORT_SPAN);
      if (!out.contains(port) && bindable(port) && bindable(port + BUS_OFFSET)) {
        out.add(port);
      }
    }
    if (out.size() < n) {
      throw new IllegalStateException("no " + n + " free port pairs in " + PORT_LOW + "+");
    }
    return out;
  }

  private static boolean bindable(int port) {
    try (ServerSocket s = new ServerSocket()) {
      s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static int indexOf(byte[] b, byte x, int from) {
    for (int i = from; i < b.length; i++) {
      if (b[i] == x) {
        return i;
      }
    }
    return -1;
  }
}
