package io.idem.server;

import io.grpc.Attributes;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerTransportFilter;
import io.grpc.Status;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Bounds the connections the client port serves for one client ({@link
 * ConnectionLimits#maxConnectionsPerClient()}). A client is its certificate subject when it
 * presented a verified one, else its IP address. Install it both as the server's transport filter
 * and as the outermost interceptor of the client service.
 *
 * <p>A connection is judged once, when its TLS and HTTP/2 handshakes are done ({@link
 * #transportReady}): within the bound it is counted until it closes ({@link #transportTerminated});
 * past it, it is marked refused and not counted, and every call on it ends at once with {@code
 * RESOURCE_EXHAUSTED} naming the client, the bound and its flag. grpc-java has no supported way for
 * a transport filter to close the transport, so the refused connection lives until the client drops
 * it or the idle bound closes it.
 *
 * <p>Thread-safe: transports become ready and end on any I/O thread.
 */
final class ConnectionGate extends ServerTransportFilter implements ServerInterceptor {
  /** The client a served connection is counted for. */
  private static final Attributes.Key<String> COUNTED_FOR =
      Attributes.Key.create("idem-connection-counted-for");

  /** Why a connection is not served. */
  private static final Attributes.Key<Status> REFUSED =
      Attributes.Key.create("idem-connection-refused");

  private final int maxPerClient;
  private final Runnable onRefused;
  private final ConcurrentHashMap<String, Integer> open = new ConcurrentHashMap<>();
  private final AtomicInteger total = new AtomicInteger();
  private final AtomicLong admitted = new AtomicLong();

  /**
   * @param maxPerClient most connections served at once per client; 0: no bound
   * @param onRefused told of each refused connection (a metric); must not block
   */
  ConnectionGate(int maxPerClient, Runnable onRefused) {
    this.maxPerClient = maxPerClient;
    this.onRefused = onRefused;
  }

  /** Connections served now, of every client. */
  int served() {
    return total.get();
  }

  /** Connections served since the start (refused ones not included). */
  long admitted() {
    return admitted.get();
  }

  /** Connections served now for {@code client} (a certificate subject or an IP address). */
  int servedFor(String client) {
    return open.getOrDefault(client, 0);
  }

  @Override
  public Attributes transportReady(Attributes attrs) {
    String client = clientOf(attrs);
    boolean[] within = {false};
    open.compute(
        client,
        (k, n) -> {
          int now = n == null ? 0 : n;
          if (maxPerClient > 0 && now >= maxPerClient) {
            return n;
          }
          within[0] = true;
          return now + 1;
        });
    if (within[0]) {
      total.incrementAndGet();
      admitted.incrementAndGet();
      return attrs.toBuilder().set(COUNTED_FOR, client).build();
    }
    onRefused.run();
    return attrs.toBuilder()
        .set(
            REFUSED,
            Status.RESOURCE_EXHAUSTED.withDescription(
                "too many connections from "
                    + client
                    + ": at most "
                    + maxPerClient
                    + " (--max-connections-per-client)"))
        .build();
  }

  @Override
  public void transportTerminated(Attributes attrs) {
    // Null when the transport ended before it was ready (a failed handshake): never counted.
    String client = attrs == null ? null : attrs.get(COUNTED_FOR);
    if (client == null) {
      return;
    }
    open.computeIfPresent(client, (k, n) -> n <= 1 ? null : n - 1);
    total.decrementAndGet();
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(
      ServerCall<Q, R> call, Metadata headers, ServerCallHandler<Q, R> next) {
    Status refused = call.getAttributes().get(REFUSED);
    if (refused == null) {
      return next.startCall(call, headers);
    }
    call.close(refused, new Metadata());
    return new ServerCall.Listener<>() {};
  }

  /** The certificate subject of a TLS client that presented one, else the IP address. */
  private static String clientOf(Attributes attrs) {
    String principal = ClientPrincipal.of(attrs.get(Grpc.TRANSPORT_ATTR_SSL_SESSION));
    if (principal != null) {
      return principal;
    }
    SocketAddress remote = attrs.get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
    if (remote instanceof InetSocketAddress inet && inet.getAddress() != null) {
      return inet.getAddress().getHostAddress();
    }
    return String.valueOf(remote);
  }
}
