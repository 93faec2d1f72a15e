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
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A TCP proxy on a loopback port in front of a node's client port, that can lose responses, delay
 * them, and reset connections. Responses are what flows from the node back to the client.
 *
 * <p>"Lose the response after forwarding the request" is {@link #blackholeResponses()} (requests
 * still reach the node, answers are swallowed) followed by {@link #resetConnections()}: the client
 * sees its connection die without an answer, exactly as when a response is lost in the network.
 */
public final class FaultProxy implements AutoCloseable {
  private final ServerSocket listener;
  private final InetSocketAddress target;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private final Thread acceptor;
  private final AtomicLong swallowedBytes = new AtomicLong();
  private volatile boolean blackhole;
  private volatile long delayMs;
  private volatile boolean closed;

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

  /** How many response bytes were swallowed so far. */
  public long swallowedBytes() {
    return swallowedBytes.get();
  }

  /** Resets every open connection (RST): clients see a broken connection. */
  public void resetConnections() {
    for (Socket s : sockets) {
      try {
        s.setSoLinger(true, 0);
        s.close();
      } catch (IOException ignored) {
        // already gone
      }
    }
    sockets.clear();
  }

  private void acceptLoop() {
    while (!closed) {
      try {
        Socket client = listener.accept();
        Socket upstream = new Socket();
        try {
          upstream.connect(target, 2_000);
        } catch (IOException e) {
          client.setSoLinger(true, 0);
          client.close();
          continue;
        }
        sockets.add(client);
        sockets.add(upstream);
        pump(client, upstream, false);
        pump(upstream, client, true);
      } catch (IOException e) {
        if (!closed) {
          continue;
        }
        return;
      }
    }
  }

  private void pump(Socket from, Socket to, boolean isResponse) {
    Thread t =
        new Thread(
            () -> {
              byte[] buf = new byte[16 * 1024];
              try (InputStream in = from.getInputStream();
                  OutputStream out = to.getOutputStream()) {
                for (int n; (n = in.read(buf)) >= 0; ) {
                  long d = delayMs;
                  if (d > 0) {
                    Thread.sleep(d);
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
                closeQuietly(from);
                closeQuietly(to);
              }
            },
            "fault-proxy-pump");
    t.setDaemon(true);
    t.start();
  }

  private void closeQuietly(Socket s) {
    sockets.remove(s);
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
