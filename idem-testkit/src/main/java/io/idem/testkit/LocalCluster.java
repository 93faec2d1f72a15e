package io.idem.testkit;

import io.idem.server.IdemServer;
import io.idem.server.ServerConfig;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;

/**
 * {@code n} Idem nodes in this JVM, on loopback ports chosen at start and kept across restarts,
 * each with its own data directory. Nodes can be killed (closed), restarted from their data, or
 * wiped and restarted so that they rejoin through snapshot install.
 */
public final class LocalCluster implements AutoCloseable {
  static {
    // Ratis ends the JVM when its gRPC server cannot bind (a port picked free and taken before
    // the bind, by another test fork): the whole fork died with it in a full run. Disabled, Ratis
    // throws instead, and startEach tries again on new ports.
    org.apache.ratis.util.ExitUtils.disableSystemExit();
  }

  private final Path baseDir;
  private final List<ServerConfig.Peer> peers;
  private final BiFunction<Integer, ServerConfig.Builder, ServerConfig.Builder> tuning;
  private final IdemServer[] nodes;

  private LocalCluster(
      int n, Path baseDir, BiFunction<Integer, ServerConfig.Builder, ServerConfig.Builder> tuning) {
    if (n < 1 || n > 9) {
      throw new IllegalArgumentException("a local cluster has 1 to 9 nodes, got " + n);
    }
    this.baseDir = baseDir;
    this.tuning = tuning;
    List<ServerConfig.Peer> p = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      p.add(
          new ServerConfig.Peer(
              "n" + (i + 1), "127.0.0.1:" + freePort(), "127.0.0.1:" + freePort()));
    }
    this.peers = List.copyOf(p);
    this.nodes = new IdemServer[n];
  }

  /** Starts {@code n} nodes under {@code baseDir} with default settings. */
  public static LocalCluster start(int n, Path baseDir) {
    return start(n, baseDir, b -> b);
  }

  /** Starts {@code n} nodes; {@code tuning} adjusts every node's configuration. */
  public static LocalCluster start(
      int n, Path baseDir, UnaryOperator<ServerConfig.Builder> tuning) {
    return startEach(n, baseDir, (i, b) -> tuning.apply(b));
  }

  /**
   * Starts {@code n} nodes; {@code tuning} adjusts the configuration of node {@code i} (0-based),
   * so that nodes can run with different flags. It applies again on every restart of that node.
   */
  public static LocalCluster startEach(
      int n, Path baseDir, BiFunction<Integer, ServerConfig.Builder, ServerConfig.Builder> tuning) {
    for (int attempt = 1; ; attempt++) {
      LocalCluster c = new LocalCluster(n, baseDir, tuning);
      try {
        for (int i = 0; i < n; i++) {
          c.restart(i);
        }
        return c;
      } catch (RuntimeException e) {
        c.close();
        if (attempt >= PORT_ATTEMPTS || !portTaken(e)) {
          throw e;
        }
        // A port drawn free was taken before its node bound it (by a test in another fork, say):
        // the new cluster holds no data yet, so start it again on other ports.
        c.deleteNodeDirs();
      }
    }
  }

  /** How many times {@link #startEach} draws new ports when one was taken before it was bound. */
  private static final int PORT_ATTEMPTS = 3;

  private static boolean portTaken(Throwable e) {
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      String m = t.getMessage();
      if (m != null && (m.contains("Address already in use") || m.contains("Failed to bind"))) {
        return true;
      }
    }
    return false;
  }

  /** Deletes the data directories of this cluster's nodes (a cluster that never started). */
  private void deleteNodeDirs() {
    for (ServerConfig.Peer p : peers) {
      deleteTree(baseDir.resolve(p.id()));
    }
  }

  private static void deleteTree(Path dir) {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path f : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.delete(f);
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * A cluster of {@code n} nodes none of which runs yet: {@link #restart(int)} starts each, in the
   * order a test needs (a node alone first, for one).
   */
  public static LocalCluster unstarted(
      int n, Path baseDir, UnaryOperator<ServerConfig.Builder> tuning) {
    return new LocalCluster(n, baseDir, (i, b) -> tuning.apply(b));
  }

  /**
   * The configuration of a node {@code id} that joins a cluster ({@code idem server --join}), its
   * data in {@code dataDir}, on two free loopback ports; the caller adds what else it needs (the
   * cluster's {@code groups}, for one) and builds it.
   */
  public static ServerConfig.Builder joiner(Path dataDir, String id) {
    return ServerConfig.builder()
        .id(id)
        .dataDir(dataDir)
        .peers(
            List.of(
                new ServerConfig.Peer(id, "127.0.0.1:" + freePort(), "127.0.0.1:" + freePort())))
        .join(true);
  }

  /** How many nodes the cluster has (live or not). */
  public int size() {
    return nodes.length;
  }

  /** Client addresses of all nodes, host:port. */
  public List<String> clientAddresses() {
    return peers.stream().map(ServerConfig.Peer::clientAddress).toList();
  }

  /** Client address of node {@code i}. */
  public String clientAddress(int i) {
    return peers.get(i).clientAddress();
  }

  /** Node {@code i}, or {@code null} while it is down. */
  public IdemServer node(int i) {
    return nodes[i];
  }

  /** Whether node {@code i} runs. */
  public boolean isUp(int i) {
    return nodes[i] != null;
  }

  /** Stops node {@code i} (its data stays). */
  public void kill(int i) {
    IdemServer s = nodes[i];
    nodes[i] = null;
    if (s != null) {
      try {
        s.close();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
  }

  /** Starts node {@code i} from its data directory (snapshot and log). */
  public void restart(int i) {
    if (nodes[i] != null) {
      throw new IllegalStateException("node " + i + " is running");
    }
    // All nodes share one JVM (and, on a small machine, the test's cores): a longer election
    // timeout than a real deployment's keeps GC and JIT pauses from triggering elections.
    ServerConfig.Builder b =
        ServerConfig.builder()
            .id(peers.get(i).id())
            .dataDir(baseDir.resolve(peers.get(i).id()))
            .peers(peers)
            .electionTimeoutMs(1_000, 2_000);
    try {
      nodes[i] = IdemServer.start(tuning.apply(i, b).build());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * Stops node {@code i}, deletes its data, and starts it empty, so that it rejoins through
   * snapshot install.
   *
   * <p>Raft assumes a node never loses its log, and Ratis's leader keeps the wiped node's old match
   * index: it would probe the empty node from that index forever instead of installing a snapshot
   * (Ratis {@code LogAppenderBase.getNextIndexForInconsistency}). A new leader starts without that
   * memory, so if another node led while {@code i} was wiped, leadership is moved to a third node
   * (or, without one, that leader is restarted). This tests Ratis's snapshot install under
   * controlled conditions; it is not the procedure for a production node that lost its disk, which
   * rejoins under a new id (docs/OPERATIONS.md).
   */
  public void wipeAndRestart(int i) {
    int leaderBefore = -1;
    for (int j = 0; j < nodes.length; j++) {
      if (j != i && nodes[j] != null && nodes[j].isLeader()) {
        leaderBefore = j;
      }
    }
    kill(i);
    deleteTree(baseDir.resolve(peers.get(i).id()));
    restart(i);
    if (leaderBefore < 0 || nodes[leaderBefore] == null) {
      return;
    }
    for (int k = 0; k < nodes.length; k++) {
      if (k != i && k != leaderBefore && nodes[k] != null) {
        try {
          nodes[leaderBefore].transferLeadership(peers.get(k).id(), Duration.ofSeconds(10));
          return;
        } catch (IOException e) {
          // try the next candidate, or fall back to a restart below
        }
      }
    }
    kill(leaderBefore);
    restart(leaderBefore);
  }

  /** Moves leadership to node {@code i} (which should be caught up), from whichever node leads. */
  public void transferLeadershipTo(int i) {
    Eventually.until(
        "node " + i + " leads",
        Duration.ofSeconds(60),
        () -> {
          if (nodes[i].isLeader()) {
            return true;
          }
          int leader = waitForLeader(Duration.ofSeconds(30));
          try {
            nodes[leader].transferLeadership(peers.get(i).id(), Duration.ofSeconds(10));
          } catch (IOException e) {
            return false;
          }
          return nodes[i].isLeader();
        });
  }

  /**
   * Waits until a live node has led for {@link #STABLE_LEADERSHIP} in one term, and returns its
   * index. (Right after start or a failover, leadership can move again within a second.)
   *
   * @throws AssertionError if no leader is stable within {@code timeout}
   */
  public int waitForLeader(Duration timeout) {
    long[] seen = {-1, -1, 0}; // index, term, since (nanos)
    return Eventually.get(
        "a stable leader among live nodes",
        timeout,
        () -> {
          for (int i = 0; i < nodes.length; i++) {
            IdemServer n = nodes[i];
            if (n != null && n.isLeader()) {
              long term = n.status().getTerm();
              long now = System.nanoTime();
              if (seen[0] != i || seen[1] != term) {
                seen[0] = i;
                seen[1] = term;
                seen[2] = now;
              }
              return now - seen[2] >= STABLE_LEADERSHIP.toNanos() ? i : null;
            }
          }
          seen[0] = -1;
          return null;
        });
  }

  /** How long a leader must hold its term before {@link #waitForLeader} returns it. */
  public static final Duration STABLE_LEADERSHIP = Duration.ofMillis(500);

  /** Digest of every live node, by node id. */
  public Map<String, String> digests() {
    Map<String, String> d = new LinkedHashMap<>();
    for (int i = 0; i < nodes.length; i++) {
      if (nodes[i] != null) {
        d.put(peers.get(i).id(), nodes[i].digest());
      }
    }
    return d;
  }

  /**
   * Waits until every live node has applied the same entry with the same digest, and returns that
   * digest. Replicas apply at different moments: a follower learns that an entry committed only
   * from the leader's next message, so the leader is often one entry ahead. This samples every
   * node's (applied index, digest) over time and succeeds once some index was seen on every live
   * node; two digests for the same index fail at once, since that is divergence.
   *
   * @throws AssertionError naming the digests if they do not converge within {@code timeout}, or if
   *     two nodes had different states at the same applied index
   */
  public String awaitEqualDigests(Duration timeout) {
    List<Map<Long, String>> seen = new ArrayList<>();
    for (int i = 0; i < nodes.length; i++) {
      seen.add(new HashMap<>());
    }
    return Eventually.get(
        "equal digests on all live nodes",
        timeout,
        () -> {
          for (int i = 0; i < nodes.length; i++) {
            IdemServer s = nodes[i];
            if (s == null) {
              continue;
            }
            long before = s.appliedIndex();
            String d = s.digest();
            if (s.appliedIndex() == before) {
              seen.get(i).put(before, d);
            }
          }
          return commonDigest(seen);
        },
        () -> "digests " + digests() + ", applied " + appliedIndexes());
  }

  /** The digest at an applied index every live node reported, or null; fails on a divergence. */
  private String commonDigest(List<Map<Long, String>> seen) {
    Map<Long, String> first = null;
    for (int i = 0; i < nodes.length; i++) {
      if (nodes[i] != null) {
        first = seen.get(i);
        break;
      }
    }
    if (first == null) {
      return null;
    }
    for (Map.Entry<Long, String> e : first.entrySet()) {
      boolean everywhere = true;
      for (int i = 0; i < nodes.length; i++) {
        if (nodes[i] == null) {
          continue;
        }
        String d = seen.get(i).get(e.getKey());
        if (d == null) {
          everywhere = false;
        } else if (!d.equals(e.getValue())) {
          throw new AssertionError(
              "replicas diverged: at applied index "
                  + e.getKey()
                  + " "
                  + peers.get(i).id()
                  + " has digest "
                  + d
                  + " and another node "
                  + e.getValue());
        }
      }
      if (everywhere) {
        return e.getValue();
      }
    }
    return null;
  }

  /** Applied index of every live node. */
  public Map<String, Long> appliedIndexes() {
    Map<String, Long> m = new LinkedHashMap<>();
    for (int i = 0; i < nodes.length; i++) {
      if (nodes[i] != null) {
        m.put(peers.get(i).id(), nodes[i].appliedIndex());
      }
    }
    return m;
  }

  /** Stops every node. */
  @Override
  public void close() {
    for (int i = 0; i < nodes.length; i++) {
      try {
        kill(i);
      } catch (RuntimeException e) {
        // keep closing the others
      }
    }
  }

  /**
   * A free loopback port (bound and released; a race with other processes is possible but rare).
   */
  public static int freePort() {
    // Below Linux's ephemeral range (32768-60999 by default), which the kernel hands to outgoing
    // connections: a port taken from it by ServerSocket(0) was free when asked, but a client
    // connection could take it before the node bound it, or while the node was down between a kill
    // and its restart on the same port. Ratis exits the JVM when its port is taken.
    java.util.concurrent.ThreadLocalRandom random =
        java.util.concurrent.ThreadLocalRandom.current();
    for (int attempt = 0; attempt < 200; attempt++) {
      int port = random.nextInt(FREE_PORT_LOW, FREE_PORT_HIGH);
      try (ServerSocket s = new ServerSocket(port, 1, java.net.InetAddress.getLoopbackAddress())) {
        return s.getLocalPort();
      } catch (IOException taken) {
        // another one
      }
    }
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The range {@link #freePort} draws from: below the kernel's ephemeral ports. */
  static final int FREE_PORT_LOW = 20_000;

  static final int FREE_PORT_HIGH = 32_000;
}
