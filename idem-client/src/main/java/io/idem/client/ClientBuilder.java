package io.idem.client;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The settings and checks of {@link IdemClient.Builder}, the one class that extends it (which keeps
 * the builder's public name {@code IdemClient.Builder} while its body lives here). Not thread-safe.
 */
abstract sealed class ClientBuilder permits IdemClient.Builder {
  private List<String> servers = List.of();
  private int window = 128;
  private Duration requestTimeout = Duration.ofSeconds(30);
  private Duration sessionTtl = Duration.ofSeconds(60);
  private @Nullable Duration keepAlive;
  private Duration stallTimeout = Duration.ofSeconds(5);
  private Duration probeInterval = IdemClient.DEFAULT_PROBE_INTERVAL;
  private Duration rpcTimeout = Duration.ofSeconds(3);
  private @Nullable Path identityFile;
  private @Nullable String name;
  private @Nullable IdemTransport transport;
  private @Nullable ClientTls tls;
  private io.micrometer.core.instrument.@Nullable MeterRegistry meterRegistry;
  private String metricsName = "idem";

  ClientBuilder() {}

  /**
   * Connects over TLS ({@link ClientTls}: the CA to trust, and a client certificate if the servers
   * require one). For a client on a shared {@link #transport}, give the TLS to the transport
   * instead ({@link IdemTransport#create(ClientTls)}).
   */
  public IdemClient.Builder tls(ClientTls tls) {
    this.tls = tls;
    return self();
  }

  /**
   * Registers the client's meters on {@code registry} (Micrometer, an optional dependency: needed
   * only if this is called), tagged {@code client=name}: {@code idem.client.requests} (a timer per
   * operation and outcome: ok, rejected, not_sent, outcome_unknown, session_lost), {@code
   * idem.client.in.flight}, {@code idem.client.retries} (reconnects and registration retries) and
   * {@code idem.client.duplicates.seen} (answers the server gave from its saved responses). In
   * Prometheus: {@code idem_client_requests_seconds}, {@code idem_client_retries_total}, ...
   *
   * @param name the {@code client} tag, to tell several clients in one registry apart
   */
  public IdemClient.Builder meterRegistry(
      io.micrometer.core.instrument.MeterRegistry registry, String name) {
    if (registry == null || name == null || name.isEmpty()) {
      throw new IllegalArgumentException("a meter registry and a non-empty name are required");
    }
    this.meterRegistry = registry;
    this.metricsName = name;
    return self();
  }

  /** The cluster's client addresses, host:port each. Required. */
  public IdemClient.Builder servers(List<String> servers) {
    this.servers = List.copyOf(servers);
    return self();
  }

  /** See {@link #servers(List)}: a comma-separated list. */
  public IdemClient.Builder servers(String commaSeparated) {
    List<String> list = new ArrayList<>();
    for (String s : commaSeparated.split(",")) {
      if (!s.isBlank()) {
        list.add(s.trim());
      }
    }
    return servers(list);
  }

  /** Most writes in flight (the span from the lowest unanswered number). Default 128. */
  public IdemClient.Builder window(int window) {
    this.window = window;
    return self();
  }

  /** How long a call may wait for its answer. Default 30 s. */
  public IdemClient.Builder requestTimeout(Duration timeout) {
    this.requestTimeout = timeout;
    return self();
  }

  /** How long the session lives without keep-alives. Default 60 s. */
  public IdemClient.Builder sessionTtl(Duration ttl) {
    this.sessionTtl = ttl;
    return self();
  }

  /** How often to keep the session alive. Default a third of the TTL. */
  public IdemClient.Builder keepAliveInterval(Duration interval) {
    this.keepAlive = interval;
    return self();
  }

  /** Reconnect if the oldest request has no answer for this long. Default 5 s. */
  public IdemClient.Builder stallTimeout(Duration timeout) {
    this.stallTimeout = timeout;
    return self();
  }

  /**
   * With calls waiting and nothing heard from the server in use for this long, ask the other
   * servers who leads (a Status RPC with this deadline, again every 100 ms while it lasts) and move
   * at once to a newer leader they name, resending what is outstanding with its numbers. A few Raft
   * heartbeats: long enough that a busy leader's answers usually arrive first, short against the
   * election it waits for. At or above the stall timeout, probes never happen. Default {@link
   * IdemClient#DEFAULT_PROBE_INTERVAL}.
   */
  public IdemClient.Builder probeInterval(Duration interval) {
    this.probeInterval = interval;
    return self();
  }

  /**
   * Makes the client durable: it records its identity and outstanding requests in {@code file}
   * (fsynced before a request leaves), and a client restarted with the same file and name resumes
   * the session and resends what was in flight.
   */
  public IdemClient.Builder identity(Path file, String name) {
    this.identityFile = file;
    this.name = name;
    return self();
  }

  /**
   * Shares {@code transport} (connections and timer) with the other clients built with it, instead
   * of opening connections of its own. The session stays this client's own. Default: a private
   * transport, closed with the client.
   */
  public IdemClient.Builder transport(IdemTransport transport) {
    this.transport = transport;
    return self();
  }

  /**
   * Returns the client. In a cluster of one Raft group it connects lazily, on its first call. In a
   * cluster of several it first asks the servers for the partition map and registers in the
   * metadata group, which gives it its id, and returns once registered: a cluster whose metadata
   * group has no leader for the whole request timeout makes it throw.
   *
   * @throws IllegalArgumentException naming the first bad setting
   * @throws NotSentException if the cluster has several groups and the metadata group did not
   *     register the client within the request timeout (the reason: {@code DEADLINE})
   */
  public IdemClient build() {
    if (servers.isEmpty()) {
      throw new IllegalArgumentException("servers must name at least one host:port");
    }
    for (String s : servers) {
      int colon = s.lastIndexOf(':');
      boolean ok = colon > 0;
      if (ok) {
        try {
          int port = Integer.parseInt(s.substring(colon + 1));
          ok = port > 0 && port < 65536;
        } catch (NumberFormatException e) {
          ok = false;
        }
      }
      if (!ok) {
        throw new IllegalArgumentException("server must be host:port, got \"" + s + "\"");
      }
    }
    if (window < 1 || window > 65_536) {
      throw new IllegalArgumentException("window must be in [1, 65536], got " + window);
    }
    positive("requestTimeout", requestTimeout);
    positive("sessionTtl", sessionTtl);
    positive("stallTimeout", stallTimeout);
    positive("probeInterval", probeInterval);
    positive("rpcTimeout", rpcTimeout);
    Duration ka = keepAlive == null ? sessionTtl.dividedBy(3) : keepAlive;
    positive("keepAliveInterval", ka);
    if (ka.compareTo(sessionTtl) >= 0) {
      throw new IllegalArgumentException(
          "keepAliveInterval " + ka + " must be shorter than sessionTtl " + sessionTtl);
    }
    if (tls != null && transport != null) {
      throw new IllegalArgumentException(
          "a client on a shared transport uses the transport's TLS: give it to"
              + " IdemTransport.create(tls), not to the builder");
    }
    if (identityFile != null && (name == null || name.isEmpty() || name.length() > 256)) {
      throw new IllegalArgumentException("an identity needs a name of 1 to 256 characters");
    }
    ClientSettings settings =
        new ClientSettings(
            servers,
            window,
            requestTimeout.toMillis(),
            sessionTtl.toMillis(),
            ka.toMillis(),
            stallTimeout.toMillis(),
            probeInterval.toMillis(),
            rpcTimeout.toMillis(),
            identityFile,
            name,
            transport,
            tls);
    GroupSessions sessions = GroupSessions.open(settings);
    CallObserver observer =
        meterRegistry == null
            ? CallObserver.NONE
            : MicrometerObserver.register(meterRegistry, metricsName, sessions);
    return new IdemClient(settings, sessions, requestTimeout.toNanos(), null, observer);
  }

  static void positive(String what, Duration d) {
    if (d == null || d.isZero() || d.isNegative()) {
      throw new IllegalArgumentException(what + " must be positive, got " + d);
    }
  }

  private IdemClient.Builder self() {
    return (IdemClient.Builder) this; // sealed: the only subclass
  }
}
