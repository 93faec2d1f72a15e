package io.idem.server;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsExchange;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.ClientAuth;
import io.grpc.netty.shaded.io.netty.handler.ssl.JdkSslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslProvider;
import io.idem.core.SessionInfo;
import io.idem.proto.GroupStatus;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Member;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Meter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The admin HTTP endpoint of a node ({@code --admin-address}), on the JDK's HTTP server:
 *
 * <ul>
 *   <li>{@code GET /metrics}: every meter in the Prometheus text format;
 *   <li>{@code GET /api/status}: JSON for the status page: every member's {@code Status} (asked
 *       over its client port, one second at most each) with, in a cluster of several Raft groups,
 *       its replica of each group, this node's counters, and the sessions saving the most
 *       responses;
 *   <li>{@code GET /}: the status page, plain HTML and JavaScript that polls {@code /api/status}.
 * </ul>
 *
 * Read-only: nothing here changes the cluster. On a node with TLS it serves HTTPS and requires a
 * client certificate that the node's CA signed, and it lists sessions only to a caller whose
 * certificate's principal holds the role admin (or to anyone while auth is off). Without TLS it has
 * no way to tell callers apart, so {@link ServerConfig} keeps it on a loopback address.
 */
final class AdminServer implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(AdminServer.class);
  private static final long PEER_DEADLINE_MS = 1_000;
  private static final int LARGEST_SESSIONS = 10;

  private final HttpServer http;
  private final ExecutorService threads;
  private final ServerMetrics metrics;
  private final TlsFiles tls; // the node's own, to ask its peers' client ports; null: plaintext
  private final Supplier<StatusReply> self;
  private final Function<Integer, List<SessionInfo>> largestSessions;
  private final java.util.function.Predicate<String> isAdmin;
  private final Map<String, ManagedChannel> channels = new ConcurrentHashMap<>();
  private final ObjectMapper json = new ObjectMapper();
  private final byte[] page;

  /**
   * Listens on {@code address} (host:port; port 0 picks one).
   *
   * @param tls the node's TLS files: HTTPS with client certificates; null: plain HTTP
   * @param self this node's status
   * @param largestSessions the n sessions saving the most responses
   * @param isAdmin whether a principal ("" without a certificate) may see session details
   * @throws IOException if the address cannot be bound
   */
  AdminServer(
      String address,
      ServerMetrics metrics,
      TlsFiles tls,
      Supplier<StatusReply> self,
      Function<Integer, List<SessionInfo>> largestSessions,
      java.util.function.Predicate<String> isAdmin)
      throws IOException {
    this.metrics = metrics;
    this.tls = tls;
    this.self = self;
    this.largestSessions = largestSessions;
    this.isAdmin = isAdmin;
    try (InputStream in = AdminServer.class.getResourceAsStream("status.html")) {
      if (in == null) {
        throw new IOException("the status page is missing from the jar");
      }
      this.page = in.readAllBytes();
    }
    int colon = address.lastIndexOf(':');
    InetSocketAddress bind =
        new InetSocketAddress(
            address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)));
    if (tls == null) {
      this.http = HttpServer.create(bind, 16);
    } else {
      HttpsServer https = HttpsServer.create(bind, 16);
      SSLContext context = sslContext(tls);
      https.setHttpsConfigurator(
          new HttpsConfigurator(context) {
            @Override
            public void configure(HttpsParameters params) {
              SSLParameters p = context.getDefaultSSLParameters();
              p.setNeedClientAuth(true);
              params.setSSLParameters(p);
            }
          });
      this.http = https;
    }
    this.threads =
        Executors.newFixedThreadPool(
            2,
            r -> {
              Thread t = new Thread(r, "idem-admin");
              t.setDaemon(true);
              return t;
            });
    http.setExecutor(threads);
    http.createContext("/metrics", x -> answer(x, this::metricsBody));
    http.createContext("/api/status", x -> answer(x, this::statusBody));
    http.createContext("/", x -> answer(x, this::pageBody));
    http.start();
  }

  /**
   * A JDK {@link SSLContext} for the node's PEM files and CA, through Netty's JDK provider (which
   * reads PEM chains and PKCS#8 keys).
   */
  private static SSLContext sslContext(TlsFiles tls) throws IOException {
    try {
      SslContext netty =
          SslContextBuilder.forServer(tls.certificateChain().toFile(), tls.privateKey().toFile())
              .trustManager(tls.trustedCertificates().toFile())
              .clientAuth(ClientAuth.REQUIRE)
              .sslProvider(SslProvider.JDK)
              .build();
      return ((JdkSslContext) netty).context();
    } catch (javax.net.ssl.SSLException | IllegalArgumentException e) {
      throw new IOException("cannot use the TLS files " + tls + ": " + e.getMessage(), e);
    }
  }

  /** The port it listens on. */
  int port() {
    return http.getAddress().getPort();
  }

  private record Body(int status, String contentType, byte[] bytes) {}

  private interface Handler {
    Body handle(HttpExchange x) throws IOException;
  }

  private static void answer(HttpExchange x, Handler handler) throws IOException {
    Body body;
    try {
      if (!x.getRequestMethod().equals("GET") && !x.getRequestMethod().equals("HEAD")) {
        body = text(405, "only GET\n");
        x.getResponseHeaders().set("Allow", "GET, HEAD");
      } else {
        body = handler.handle(x);
      }
    } catch (RuntimeException e) {
      LOG.warn("admin request {} failed", x.getRequestURI(), e);
      body = text(500, "internal error: " + e + "\n");
    }
    x.getResponseHeaders().set("Content-Type", body.contentType());
    x.getResponseHeaders().set("Cache-Control", "no-store");
    boolean head = x.getRequestMethod().equals("HEAD");
    x.sendResponseHeaders(body.status(), head ? -1 : body.bytes().length);
    if (!head) {
      try (OutputStream out = x.getResponseBody()) {
        out.write(body.bytes());
      }
    }
    x.close();
  }

  private static Body text(int status, String s) {
    return new Body(status, "text/plain; charset=utf-8", s.getBytes(StandardCharsets.UTF_8));
  }

  private Body metricsBody(HttpExchange x) {
    if (!x.getRequestURI().getPath().equals("/metrics")) {
      return text(404, "not found\n");
    }
    return new Body(
        200,
        "text/plain; version=0.0.4; charset=utf-8",
        metrics.scrape().getBytes(StandardCharsets.UTF_8));
  }

  private Body pageBody(HttpExchange x) {
    String path = x.getRequestURI().getPath();
    if (!path.equals("/") && !path.equals("/index.html")) {
      return text(404, "not found\n");
    }
    return new Body(200, "text/html; charset=utf-8", page);
  }

  private Body statusBody(HttpExchange x) throws IOException {
    if (!x.getRequestURI().getPath().equals("/api/status")) {
      return text(404, "not found\n");
    }
    StatusReply mine = self.get();
    ObjectNode root = json.createObjectNode();
    root.put("node", mine.getId());
    root.put("leader", mine.getLeaderId());
    root.put("timeMs", System.currentTimeMillis());
    ArrayNode nodes = root.putArray("nodes");
    for (Member m : mine.getMembersList()) {
      ObjectNode n = nodes.addObject();
      n.put("id", m.getId());
      n.put("clientAddress", m.getClientAddress());
      StatusReply s;
      try {
        s = m.getId().equals(mine.getId()) ? mine : peer(m.getClientAddress());
      } catch (RuntimeException e) {
        n.put("reachable", false);
        n.put("error", String.valueOf(e.getMessage()));
        continue;
      }
      n.put("reachable", true);
      n.put("role", s.getRole());
      n.put("term", s.getTerm());
      n.put("leader", s.getLeaderId());
      n.put("appliedIndex", s.getAppliedIndex());
      n.put("logStartIndex", s.getLogStartIndex());
      n.put("liveSessions", s.getLiveSessions());
      n.put("kvKeys", s.getKeys());
      n.put("leases", s.getLeases());
      n.put("backendUsedBytes", s.getBackendUsedBytes());
      n.put("backendBytes", s.getBackendBytes());
      n.put("noSpaceAlarm", s.getNoSpaceAlarm());
      n.put("duplicatesSuppressed", s.getDuplicatesSuppressed());
      n.put("entriesAppended", s.getEntriesAppended());
      n.put("commandsAppended", s.getCommandsAppended());
      n.put("digest", s.getDigest());
      n.put("digestIndex", s.getDigestIndex());
      // A cluster of several Raft groups: this node's replica of each (none for one group).
      ArrayNode groups = n.putArray("groups");
      for (GroupStatus g : s.getGroupsList()) {
        ObjectNode o = groups.addObject();
        o.put("group", g.getGroup());
        o.put("role", g.getRole());
        o.put("leader", g.getLeaderId());
        o.put("term", g.getTerm());
        o.put("appliedIndex", g.getAppliedIndex());
        o.put("liveSessions", g.getLiveSessions());
        o.put("kvKeys", g.getKeys());
        o.put("keyRecords", g.getKeyRecords());
      }
    }
    ObjectNode writes = root.putObject("writes");
    ObjectNode rejections = root.putObject("rejections");
    for (Meter meter : metrics.registry().getMeters()) {
      if (meter instanceof Counter c && c.count() > 0) {
        String name = meter.getId().getName();
        if (name.equals("idem.writes")) {
          writes.put(meter.getId().getTag("kind"), (long) c.count());
        } else if (name.equals("idem.rejections")) {
          rejections.put(meter.getId().getTag("code"), (long) c.count());
        }
      }
    }
    String caller = x instanceof HttpsExchange e ? principal(e.getSSLSession()) : "";
    boolean details = isAdmin.test(caller);
    root.put("sessionDetails", details);
    ArrayNode largest = root.putArray("largestSessions");
    for (SessionInfo s :
        details ? largestSessions.apply(LARGEST_SESSIONS) : List.<SessionInfo>of()) {
      ObjectNode o = largest.addObject();
      o.put("clientId", s.clientId());
      o.put("name", s.name());
      o.put("savedResponses", s.savedResponses());
      o.put("nextSeq", s.nextSeq());
      o.put("ttlMs", s.ttlMs());
    }
    return new Body(200, "application/json", json.writeValueAsBytes(root));
  }

  /** The subject of the verified client certificate of {@code session}, or "". */
  private static String principal(javax.net.ssl.SSLSession session) {
    String p = ClientPrincipal.of(session);
    return p == null ? "" : p;
  }

  private StatusReply peer(String clientAddress) {
    ManagedChannel channel = channels.computeIfAbsent(clientAddress, this::channel);
    return IdemGrpc.newBlockingStub(channel)
        .withDeadlineAfter(PEER_DEADLINE_MS, TimeUnit.MILLISECONDS)
        .status(StatusRequest.getDefaultInstance());
  }

  private ManagedChannel channel(String address) {
    NettyChannelBuilder b = NettyChannelBuilder.forTarget(address);
    if (tls == null) {
      return b.usePlaintext().build();
    }
    try {
      return b.sslContext(
              GrpcSslContexts.forClient()
                  .trustManager(tls.trustedCertificates().toFile())
                  .keyManager(tls.certificateChain().toFile(), tls.privateKey().toFile())
                  .build())
          .build();
    } catch (javax.net.ssl.SSLException e) {
      throw new IllegalStateException("cannot use the TLS files " + tls, e);
    }
  }

  @Override
  public void close() {
    http.stop(0);
    threads.shutdownNow();
    channels.values().forEach(ManagedChannel::shutdownNow);
  }
}
