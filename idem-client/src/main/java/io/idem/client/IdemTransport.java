package io.idem.client;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.ForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ForkJoinWorkerThread;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLException;
import org.jspecify.annotations.Nullable;

/**
 * Connections to the servers, one timer thread and a worker pool, shared by the {@link IdemClient}s
 * of a process that are built with {@link IdemClient.Builder#transport}. Every client still has its
 * own session; sharing means one TCP connection per server instead of one per client. A client
 * built without a transport gets a private one and closes it with itself.
 *
 * <p>Threads: gRPC's I/O threads only hand frames to the sessions; the timer thread ticks them; the
 * worker pool (daemon threads named {@code idem-client-worker-N}) runs each session's network and
 * journal work in order and completes the callers' futures. Callbacks attached to those futures run
 * on the worker pool unless the caller chose an executor ({@code thenApplyAsync(fn, executor)}).
 *
 * <p>Connections heal: every connection sends HTTP/2 keep-alive pings ({@link #KEEPALIVE_TIME},
 * also while idle) and is dropped when a ping goes unanswered for {@link #KEEPALIVE_TIMEOUT}; and a
 * session whose stream stalls replaces the connection under it if the connection as a whole has
 * been silent as long (a NAT or a firewall that dropped its state leaves a socket that is open but
 * dead, in one direction or both). The next call opens a new connection.
 *
 * <p>Close the transport after the clients that use it. Thread-safe.
 */
public final class IdemTransport implements AutoCloseable {

  /** How often an HTTP/2 keep-alive ping goes out on a connection. */
  public static final Duration KEEPALIVE_TIME = Duration.ofSeconds(10);

  /** How long a keep-alive ping may go unanswered before the connection is dropped. */
  public static final Duration KEEPALIVE_TIMEOUT = Duration.ofSeconds(5);

  /** One connection to a server, and when anything last arrived on it. */
  static final class Connection {
    final ManagedChannel managed;
    final Channel channel;
    volatile long lastInboundNanos = System.nanoTime();

    private Connection(ManagedChannel managed) {
      this.managed = managed;
      this.channel = ClientInterceptors.intercept(managed, new InboundClock(this));
    }
  }

  private final Map<String, Connection> connections = new HashMap<>();
  private final ScheduledExecutorService timer;
  private final ExecutorService workers;
  private final AtomicInteger replaced = new AtomicInteger();
  private final Set<Runnable> onShutdown = new LinkedHashSet<>();
  private boolean closed;
  private final @Nullable SslContext tls; // null: plaintext

  private IdemTransport(@Nullable ClientTls tls) {
    this.tls = tls == null ? null : sslContext(tls);
    this.timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "idem-client-timer");
              t.setDaemon(true);
              return t;
            });
    AtomicInteger n = new AtomicInteger();
    // A work-stealing pool: handing a task over costs little while it is busy (a cached pool's
    // hand-off wakes a parked thread every time), and a callback that blocks on another call
    // (CompletableFuture.get) makes it add a thread rather than stall.
    this.workers =
        new ForkJoinPool(
            Math.max(2, Runtime.getRuntime().availableProcessors()),
            pool -> {
              ForkJoinWorkerThread t =
                  ForkJoinPool.defaultForkJoinWorkerThreadFactory.newThread(pool);
              t.setName("idem-client-worker-" + n.incrementAndGet());
              t.setDaemon(true);
              return t;
            },
            null,
            true);
  }

  /** A new transport, plaintext; it connects lazily, to each server on first use. */
  public static IdemTransport create() {
    return new IdemTransport(null);
  }

  /**
   * A new transport whose connections use TLS ({@code tls}); it connects lazily.
   *
   * @throws IllegalArgumentException if the files do not make a TLS context (the message says why)
   */
  public static IdemTransport create(ClientTls tls) {
    if (tls == null) {
      throw new IllegalArgumentException("tls must not be null (use create() for plaintext)");
    }
    return new IdemTransport(tls);
  }

  private static SslContext sslContext(ClientTls tls) {
    try {
      SslContextBuilder b =
          GrpcSslContexts.forClient().trustManager(tls.trustedCertificates().toFile());
      java.nio.file.Path chain = tls.certificateChain();
      java.nio.file.Path key = tls.privateKey();
      if (chain != null && key != null) { // ClientTls has both or neither
        b.keyManager(chain.toFile(), key.toFile());
      }
      return b.build();
    } catch (SSLException | IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "cannot use the TLS files " + tls + ": " + e.getMessage(), e);
    }
  }

  /**
   * The client address where a session of this transport last found the leader: a new session
   * starts there instead of asking the servers in turn, so that many sessions (a bench, a pool of
   * clients) discover the leader once. Empty until a session connects.
   */
  private volatile String lastLeader = "";

  /** Where a session of this transport last found the leader; empty if none did yet. */
  String lastLeader() {
    return lastLeader;
  }

  /** A session of this transport found the leader at {@code address}. */
  void noteLeader(String address) {
    lastLeader = address;
  }

  /** The connection to {@code address} (host:port), opened on first use. */
  synchronized Connection connection(String address) {
    if (closed) {
      throw new IllegalStateException("the client transport is closed");
    }
    return connections.computeIfAbsent(address, a -> new Connection(open(a)));
  }

  private ManagedChannel open(String address) {
    int colon = address.lastIndexOf(':');
    NettyChannelBuilder b =
        NettyChannelBuilder.forAddress(
            address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)));
    if (tls == null) {
      b.usePlaintext();
    } else {
      b.sslContext(tls);
    }
    return b
        // Frames are handed to the sessions on the I/O threads, without a hop per message.
        .directExecutor()
        .keepAliveTime(KEEPALIVE_TIME.toMillis(), TimeUnit.MILLISECONDS)
        .keepAliveTimeout(KEEPALIVE_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
        .keepAliveWithoutCalls(true)
        .maxInboundMessageSize(64 << 20)
        .build();
  }

  /**
   * Drops the connection to {@code address} if nothing has arrived on it for {@code silentNanos}:
   * it is dead (half-open, or silent one way). Its streams fail, and the next call opens a new
   * connection. A connection that still carries answers to other sessions is kept.
   */
  void replaceIfSilent(String address, long silentNanos) {
    Connection dead;
    synchronized (this) {
      Connection c = connections.get(address);
      if (c == null || System.nanoTime() - c.lastInboundNanos < silentNanos) {
        return;
      }
      connections.remove(address);
      dead = c;
    }
    replaced.incrementAndGet();
    dead.managed.shutdownNow();
  }

  /** How many connections were dropped as dead so far. */
  public int connectionsReplaced() {
    return replaced.get();
  }

  /** The timer that ticks the sessions. */
  ScheduledExecutorService timer() {
    return timer;
  }

  /** The pool that runs the sessions' effects and completes their futures. */
  ExecutorService workers() {
    return workers;
  }

  /**
   * Runs {@code hook} when the transport shuts down (a session fails its calls then rather than
   * wait for a timer that no longer runs); false if it is shut down already.
   */
  synchronized boolean onShutdown(Runnable hook) {
    return !closed && onShutdown.add(hook);
  }

  /** Forgets a hook of {@link #onShutdown}. */
  synchronized void removeOnShutdown(Runnable hook) {
    onShutdown.remove(hook);
  }

  /** Starts a graceful shutdown of the connections and stops the timer; does not wait. */
  void shutdown() {
    List<Connection> open;
    List<Runnable> hooks;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      open = new ArrayList<>(connections.values());
      hooks = new ArrayList<>(onShutdown);
      onShutdown.clear();
    }
    hooks.forEach(Runnable::run);
    timer.shutdownNow();
    workers.shutdown(); // tasks already queued (completions) still run
    for (Connection c : open) {
      c.managed.shutdown(); // graceful: frames already written (a Close) still reach the server
    }
  }

  /**
   * Closes the connections, waiting up to a second for frames already written to leave, and stops
   * the timer and the workers. Clients still using the transport fail their calls.
   */
  @Override
  public void close() {
    shutdown();
    List<Connection> all;
    synchronized (this) {
      all = new ArrayList<>(connections.values());
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    try {
      for (Connection c : all) {
        c.managed.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        c.managed.shutdownNow();
      }
      workers.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      all.forEach(c -> c.managed.shutdownNow());
    }
  }

  /** Notes when anything (headers, a message, the end) arrives on a connection. */
  private static final class InboundClock implements ClientInterceptor {
    private final Connection connection;

    InboundClock(Connection connection) {
      this.connection = connection;
    }

    @Override
    public <Q, R> ClientCall<Q, R> interceptCall(
        MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
      return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
        @Override
        public void start(Listener<R> listener, Metadata headers) {
          super.start(
              new ForwardingClientCallListener.SimpleForwardingClientCallListener<>(listener) {
                @Override
                public void onHeaders(Metadata h) {
                  connection.lastInboundNanos = System.nanoTime();
                  super.onHeaders(h);
                }

                @Override
                public void onMessage(R message) {
                  connection.lastInboundNanos = System.nanoTime();
                  super.onMessage(message);
                }
              },
              headers);
        }
      };
    }
  }
}
