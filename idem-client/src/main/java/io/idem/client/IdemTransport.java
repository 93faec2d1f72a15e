package io.idem.client;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Connections to the servers and one timer thread, shared by the {@link IdemClient}s of a process
 * that are built with {@link IdemClient.Builder#transport}. Every client still has its own session;
 * sharing means one TCP connection per server instead of one per client, so the frames of many
 * sessions leave and arrive in the same writes and reads. A client built without a transport gets a
 * private one and closes it with itself.
 *
 * <p>Close the transport after the clients that use it. Thread-safe.
 */
public final class IdemTransport implements AutoCloseable {
  private final Map<String, ManagedChannel> channels = new HashMap<>();
  private final ScheduledExecutorService timer;
  private boolean closed;

  private IdemTransport() {
    this.timer =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "idem-client-timer");
              t.setDaemon(true);
              return t;
            });
  }

  /** A new transport; it connects lazily, to each server on first use. */
  public static IdemTransport create() {
    return new IdemTransport();
  }

  /** The channel to {@code address} (host:port), opened on first use. */
  synchronized ManagedChannel channel(String address) {
    if (closed) {
      throw new IdemException("the client transport is closed");
    }
    return channels.computeIfAbsent(
        address,
        a -> {
          int colon = a.lastIndexOf(':');
          return NettyChannelBuilder.forAddress(
                  a.substring(0, colon), Integer.parseInt(a.substring(colon + 1)))
              .usePlaintext()
              // Frames are handled on the I/O threads, without a hop to an executor per message.
              .directExecutor()
              .maxInboundMessageSize(64 << 20)
              .build();
        });
  }

  /** The timer that runs the clients' ticks, retries and reconnects. */
  ScheduledExecutorService timer() {
    return timer;
  }

  /** Starts a graceful shutdown of the connections and stops the timer; does not wait. */
  void shutdown() {
    List<ManagedChannel> open;
    synchronized (this) {
      if (closed) {
        return;
      }
      closed = true;
      open = new ArrayList<>(channels.values());
    }
    timer.shutdownNow();
    for (ManagedChannel ch : open) {
      ch.shutdown(); // graceful: frames already written (a Close) still reach the server
    }
  }

  /**
   * Closes the connections, waiting up to a second for frames already written to leave, and stops
   * the timer. Clients still using the transport fail their calls.
   */
  @Override
  public void close() {
    shutdown();
    List<ManagedChannel> all;
    synchronized (this) {
      all = new ArrayList<>(channels.values());
    }
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(1);
    for (ManagedChannel ch : all) {
      try {
        ch.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      ch.shutdownNow();
    }
  }
}
