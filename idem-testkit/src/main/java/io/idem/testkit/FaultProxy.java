package io.idem.testkit;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A TCP proxy on a loopback port in front of a node's client port, that can lose responses, delay
 * them, reset connections, and silence connections while leaving them open. Requests are what flows
 * from the client to the node, responses what flows back.
 *
 * <p>"Lose the response after forwarding the request" is {@link #blackholeResponses()} (requests
 * still reach the node, answers are swallowed) followed by {@link #resetConnections()}: the client
 * sees its connection die without an answer, exactly as when a response is lost in the network.
 *
 * <p>"A NAT or firewall dropped its state for a flow" is {@link #silenceOpenConnections()} (or one
 * of its one-way forms): the connections open at that moment stop forwarding, but neither end is
 * told. No FIN, no RST: each end's socket stays open, its writes succeed and go nowhere, and it
 * receives nothing more. Connections opened afterwards work normally, as a NAT opens new state for
 * a new flow. Only a client that gives up on the silent connection and opens another recovers.
 *
 * <p>"The network between the two ends is partitioned" is {@link #partition()} (or one of its
 * one-way forms), healed by {@link #heal()}: unlike a silence, it holds for every connection, open
 * or opened during the partition, until healed, and drops bytes silently (no RST, as a firewall's
 * DROP): new connections are still accepted, so a connecting end sees a connection that never
 * answers. A connection that lost bytes to a partition is reset when it heals: its stream is broken
 * mid-way (TCP would have timed out under a long partition), and new connections work.
 *
 * <p>Thread-safe: faults may be switched on and off from any thread while connections run.
 */
public final class FaultProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final InetSocketAddress target;
  private final List<Connection> connections = new CopyOnWriteArrayList<>();
  private final Thread acceptor;
  private final AtomicLong swallowedBytes = new AtomicLong();
  private final AtomicLong silencedBytes = new AtomicLong();
  private final AtomicLong acceptedConnections = new AtomicLong();
  private volatile boolean blackhole;
  private volatile long delayMs;
  private volatile boolean closed;
  private final Object partitionLock = new Object();
  private boolean partitionRequests;
  private boolean partitionResponses;

  /** One proxied connection: the client's socket and the proxy's socket to the node. */
  private static final class Connection {
    final Socket client;
    final Socket upstream;
    volatile boolean requestsSilenced;
    volatile boolean responsesSilenced;

    /** Lost bytes (or an end of stream) to a partition: reset when it heals. */
    boolean damaged;

    Connection(Socket client, Socket upstream) {
      this.client = client;
      this.upstream = upstream;
    }

    boolean silenced(boolean isResponse) {
      return isResponse ? responsesSilenced : requestsSilenced;
    }
  }

  private FaultProxy(String targetHostPort) throws IOException {
    int colon = targetHostPort.lastIndexOf(':');
    this.target =
        new InetSocketAddress(
            targetHostPort.substring(0, colon),
            Integer.parseInt(targetHostPort.substring(colon + 1)));
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    this.acceptor = new Thread(this::acceptLoop, "fault-proxy-" + listener.getLocalPort());
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** Starts a proxy to {@code targetHostPort} on a free loopback port. */
  public static FaultProxy start(String targetHostPort) {
    try {
      return new FaultProxy(targetHostPort);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** The proxy's address, host:port: give it to clients instead of the node's. */
  public String address() {
    return "127.0.0.1:" + listener.getLocalPort();
  }

  /** From now on, forward requests but swallow every response byte. */
  public void blackholeResponses() {
    blackhole = true;
  }

  /** Forward responses again. */
  public void passResponses() {
    blackhole = false;
  }

  /** Holds every forwarded chunk this long before passing it on (both directions). */
  public void delay(Duration d) {
    delayMs = d.toMillis();
  }

  /** How many response bytes were swallowed so far by {@link #blackholeResponses()}. */
  public long swallowedBytes() {
    return swallowedBytes.get();
  }

  /**
   * The connections open now go silent in both directions and stay open: whatever either end sends
   * is read and dropped, including an end of stream, as when a NAT or a firewall between them
   * dropped its state for the flow. Connections opened afterwards work normally. The silence lasts
   * until the connection ends (one end resets it, or {@link #resetConnections()} or {@link
   * #close()}).
   */
  public void silenceOpenConnections() {
    for (Connection c : connections) {
      c.requestsSilenced = true;
      c.responsesSilenced = true;
    }
  }

  /**
   * As {@link #silenceOpenConnections()}, in one direction only: on the connections open now,
   * requests (client to node) are dropped, while responses still flow.
   */
  public void silenceRequestsOnOpenConnections() {
    for (Connection c : connections) {
      c.requestsSilenced = true;
    }
  }

  /**
   * As {@link #silenceOpenConnections()}, in one direction only: on the connections open now,
   * responses (node to client) are dropped, while requests still reach the node.
   */
  public void silenceResponsesOnOpenConnections() {
    for (Connection c : connections) {
      c.responsesSilenced = true;
    }
  }

  /**
   * From now until {@link #heal()}, every byte in both directions, on open connections and on those
   * accepted meanwhile, is dropped silently: the network between the two ends is cut.
   */
  public void partition() {
    setPartition(true, true);
  }

  /**
   * As {@link #partition()}, in one direction only: requests (client to node) are dropped, while
   * responses still flow.
   */
  public void partitionRequests() {
    setPartition(true, partitionResponsesNow());
  }

  /**
   * As {@link #partition()}, in one direction only: responses (node to client) are dropped, while
   * requests still reach the node.
   */
  public void partitionResponses() {
    setPartition(partitionRequestsNow(), true);
  }

  /**
   * Ends a partition (and the silences of {@link #silenceOpenConnections()}): the connections that
   * lost bytes to it, and silenced ones, are reset; new connections work normally.
   *
   * @return how many connections were reset
   */
  public int heal() {
    List<Connection> broken = new ArrayList<>();
    synchronized (partitionLock) {
      partitionRequests = false;
      partitionResponses = false;
      for (Connection c : connections) {
        if (c.damaged || c.requestsSilenced || c.responsesSilenced) {
          broken.add(c);
        }
      }
    }
    for (Connection c : broken) {
      reset(c.client);
      reset(c.upstream);
      connections.remove(c);
    }
    return broken.size();
  }

  /** Whether a partition ({@link #partition()} or a one-way form) is in force. */
  public boolean partitioned() {
    synchronized (partitionLock) {
      return partitionRequests || partitionResponses;
    }
  }

  private void setPartition(boolean requests, boolean responses) {
    synchronized (partitionLock) {
      partitionRequests = requests;
      partitionResponses = responses;
    }
  }

  private boolean partitionRequestsNow() {
    synchronized (partitionLock) {
      return partitionRequests;
    }
  }

  private boolean partitionResponsesNow() {
    synchronized (partitionLock) {
      return partitionResponses;
    }
  }

  /**
   * Whether a partition drops this direction of {@code c} now; if so, {@code c} is marked for a
   * reset at the heal (under the lock, so that a heal never misses a connection that lost bytes).
   */
  private boolean droppedByPartition(Connection c, boolean isResponse) {
    synchronized (partitionLock) {
      boolean drop = isResponse ? partitionResponses : partitionRequests;
      if (drop) {
        c.damaged = true;
      }
      return drop;
    }
  }

  /** How many bytes (either direction) silenced connections and partitions have dropped so far. */
  public long silencedBytes() {
    return silencedBytes.get();
  }

  /**
   * How many client connections the proxy has accepted since it started (those it could not connect
   * to the node included): a client that opens a new connection makes this grow.
   */
  public long acceptedConnections() {
    return acceptedConnections.get();
  }

  /**
   * Resets every open connection (RST), silenced ones included: clients see a broken connection.
   */
  public void resetConnections() {
    for (Connection c : connections) {
      reset(c.client);
      reset(c.upstream);
    }
    connections.clear();
  }

  private static void reset(Socket s) {
    try {
      s.setSoLinger(true, 0);
      s.close();
    } catch (IOException ignored) {
      // already gone
    }
  }

  private void acceptLoop() {
    while (!closed) {
      try {
        Socket client = listener.accept();
        acceptedConnections.incrementAndGet();
        Socket upstream = new Socket();
        try {
          upstream.connect(target, 2_000);
        } catch (IOException e) {
          reset(client);
          continue;
        }
        Connection c = new Connection(client, upstream);
        connections.add(c);
        pump(c, false);
        pump(c, true);
      } catch (IOException e) {
        if (!closed) {
          continue;
        }
        return;
      }
    }
  }

  private void pump(Connection c, boolean isResponse) {
    Socket from = isResponse ? c.upstream : c.client;
    Socket to = isResponse ? c.client : c.upstream;
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[16 * 1024];
              try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                for (int n; (n = in.read(buf)) >= 0; ) {
                  long d = delayMs;
                  if (d > 0) {
                    Thread.sleep(d);
                  }
                  if (c.silenced(isResponse) || droppedByPartition(c, isResponse)) {
                    silencedBytes.addAndGet(n);
                    continue;
                  }
                  if (isResponse && blackhole) {
                    swallowedBytes.addAndGet(n);
                    continue;
                  }
                  out.write(buf, 0, n);
                  out.flush();
                }
              } catch (SocketException e) {
                // reset or closed: the other pump notices on its own
              } catch (IOException | InterruptedException e) {
                // the connection is over
              } finally {
                finish(c, from, to, isResponse);
              }
            },
            "fault-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  /**
   * A pump ended: its source closed or failed. Normally the end is passed on by closing the other
   * side too. In a silenced direction it is dropped like the data: the other end is not told.
   */
  private void finish(Connection c, Socket from, Socket to, boolean isResponse) {
    closeQuietly(from);
    if (!c.silenced(isResponse) && !droppedByPartition(c, isResponse)) {
      closeQuietly(to);
    }
    if (c.client.isClosed() && c.upstream.isClosed()) {
      connections.remove(c);
    }
  }

  private static void closeQuietly(Socket s) {
    try {
      s.close();
    } catch (IOException ignored) {
      // nothing to do
    }
  }

  @Override
  public void close() {
    closed = true;
    try {
      listener.close();
    } catch (IOException ignored) {
      // closing anyway
    }
    resetConnections();
  }
}
