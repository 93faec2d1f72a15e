package io.idem.verify;

import com.google.protobuf.ByteString;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.KeyAcquisition;
import io.idem.client.NoSpaceException;
import io.idem.client.QuotaExceededException;
import io.idem.proto.AcquireKey;
import io.idem.proto.ClientFrame;
import io.idem.proto.CloseSession;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Hello;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Operation;
import io.idem.proto.Permission;
import io.idem.proto.Quotas;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.Role;
import io.idem.proto.ServerFrame;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.net.ssl.SSLException;

/**
 * The campaign's greedy client (issue 32, "no single client can sink the cluster"): one client that
 * floods the cluster as a hostile or buggy one would, while the other clients run and are checked
 * as ever. On a secured cluster it is a principal of its own, {@value #PRINCIPAL}, whose role
 * {@value #ROLE} sets small quotas ({@link #ROLE_QUOTAS}); on a plaintext one it is the anonymous
 * principal every client shares, whose defaults {@link #limit} lowers where the other clients do
 * not reach ({@link #ANONYMOUS_QUOTAS}).
 *
 * <p>In rounds until the end of the run, with seeded choices:
 *
 * <ol>
 *   <li>appends to a list of its own with its whole window ({@value #WINDOW}) in flight, without a
 *       pause, for {@link #PIPELINE_SPAN} (past {@code list_length} on a secured cluster), then
 *       deletes the list;
 *   <li>registers sessions until refused ({@code sessions}), then closes them;
 *   <li>writes new KV keys, big values one round and small the next, until refused ({@code
 *       kv_bytes}, {@code kv_keys}), then deletes them;
 *   <li>acquires new idempotency keys until refused ({@code key_records}), then releases them.
 * </ol>
 *
 * <p>And, on a thread of its own, it keeps one session stream open that sends requests and never
 * reads its answers, a new one every {@link #STREAM_SPAN}: each request acquires a key it completed
 * with a {@value #STREAM_ANSWER_BYTES}-byte response, so that every answer carries it and the
 * unread answers pile up. At the end of a span it reads what piled up, which is when a stream the
 * server cut off shows how it ended.
 *
 * <p>Its operations are neither recorded nor checked: it is the attacker. What it got is counted
 * ({@link GreedyCounts}). Rates are bounded (one pipeline, one call at a time otherwise, a pause
 * between rounds, one stream request every {@value #STREAM_PERIOD_MS} ms), so that it is one
 * client, not a fleet.
 *
 * <p>{@link #start}, {@link #join} and {@link #close} are for one thread, the campaign's.
 */
final class GreedyClient implements AutoCloseable {
  /** The greedy client's principal on a secured cluster (the {@code greedy} test certificate). */
  static final String PRINCIPAL = "CN=greedy";

  /** Its role: KV keys under {@value #PREFIX}, idempotency keys in scope {@value #SCOPE}. */
  static final String ROLE = "campaign-greedy";

  static final String PREFIX = "greedy/";
  static final String SCOPE = "greedy";

  /**
   * The role's quotas, small enough that a round reaches them in seconds: 8 sessions (its client's,
   * its stream's and 6 more), 32 key records in 64 KiB (its stream's key holds 1 KiB), 32 KV keys
   * in 256 KiB, 256 list elements. Saved-answer bytes and leases keep the defaults.
   */
  static final Quotas ROLE_QUOTAS =
      Quotas.newBuilder()
          .setSessions(8)
          .setKeyRecords(32)
          .setKeyBytes(64 << 10)
          .setKvKeys(32)
          .setKvBytes(256 << 10)
          .setListLength(256)
          .build();

  /**
   * Without auth every client is the one anonymous principal, so the greedy client's quotas are the
   * other clients' too: the defaults go down only where those use little. 64 sessions (the other
   * clients hold about 15, more for a while after lost sessions), 32 key records (they use none),
   * 64 KV keys (they write about 15, all in their first seconds). Sessions and KV keys are freed at
   * the end of each round, so that the others wait at most a round for theirs.
   */
  static final Quotas ANONYMOUS_QUOTAS =
      Quotas.newBuilder().setSessions(64).setKeyRecords(32).setKvKeys(64).build();

  /** Calls in flight while pipelining; the client's window. */
  static final int WINDOW = 32;

  static final Duration PIPELINE_SPAN = Duration.ofSeconds(1);

  /** Most calls of one fill (sessions, KV keys, idempotency keys) in a round. */
  static final int FILL_CAP = 100;

  static final int BIG_VALUE_BYTES = 16 << 10;
  static final int SMALL_VALUE_BYTES = 64;

  /** How long a registered session lives without activity: past a round's fill if not closed. */
  static final long SESSION_TTL_MS = 10_000;

  static final Duration STREAM_SPAN = Duration.ofSeconds(15);
  static final long STREAM_PERIOD_MS = 50;

  /**
   * The response the stream's answers replay: 1 KiB. At 32 KiB (20 unread answers of 32 KiB a
   * second, well within the role's key_bytes) the checked clients' throughput halved and the ci
   * profile's round of faults did not finish in 150 s (seed 14327333780939); at 1 KiB both were as
   * without the greedy client. That amplification is a finding of issue 32, not what the campaign
   * should spend its time on.
   */
  static final int STREAM_ANSWER_BYTES = 1 << 10;

  static final String STREAM_KEY = "stream-answer";

  private static final Duration CALL_TIMEOUT = Duration.ofSeconds(5);
  private static final Duration ROUND_PAUSE_MIN = Duration.ofSeconds(1);
  private static final byte[] FINGERPRINT = "greedy".getBytes(StandardCharsets.UTF_8);

  private final List<String> servers;
  private final ClientTls tls;
  private final long seed;
  private final long end;
  private final GreedyCounts.Tally tally = new GreedyCounts.Tally();
  private final Map<String, ManagedChannel> channels = new ConcurrentHashMap<>();
  private final IdemClient client;
  private final List<Thread> threads = new ArrayList<>();
  private final Map<String, Throwable> crashed = new ConcurrentHashMap<>();

  /** Where the last registration was taken: the leader as far as this client knows. */
  private volatile String leader;

  /**
   * Sets the greedy client's quotas: on a secured cluster its role {@value #ROLE} with {@link
   * #ROLE_QUOTAS}, granted to {@value #PRINCIPAL}; on a plaintext one the defaults {@link
   * #ANONYMOUS_QUOTAS}.
   *
   * @throws IllegalStateException if no leader took a change within {@code timeout}
   */
  static void limit(ProcessCluster cluster, Duration timeout) throws InterruptedException {
    if (cluster.clientTls() == null) {
      cluster
          .admin()
          .configure(ConfigureRequest.newBuilder().setQuotas(ANONYMOUS_QUOTAS).build(), timeout);
      return;
    }
    Role role =
        Role.newBuilder()
            .setName(ROLE)
            .addPermissions(
                Permission.newBuilder().setKind(Permission.Kind.KV_READ_WRITE).setPrefix(PREFIX))
            .addPermissions(
                Permission.newBuilder().setKind(Permission.Kind.KEY_SCOPE).setPrefix(SCOPE))
            .setQuotas(ROLE_QUOTAS)
            .build();
    cluster.admin().grant(PRINCIPAL, role, timeout);
  }

  /**
   * A greedy client of {@code cluster} (through its proxies, as {@value #PRINCIPAL} if it is
   * secured) until {@code end} (System.nanoTime); not started yet.
   */
  GreedyClient(ProcessCluster cluster, long seed, long end) {
    this.servers = cluster.clientAddresses();
    this.tls = cluster.clientTls() == null ? null : cluster.tls("greedy");
    this.seed = seed;
    this.end = end;
    this.leader = servers.get(0);
    this.client =
        IdemClient.builder()
            .servers(servers)
            .requestTimeout(CALL_TIMEOUT)
            .stallTimeout(Duration.ofSeconds(2))
            .window(WINDOW)
            .tls(tls)
            .build();
  }

  /** Starts the rounds and the never-reading streams, each on a thread of its own. */
  void start() {
    thread("greedy", this::rounds);
    thread("greedy-stream", this::neverReadingStreams);
  }

  private void thread(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.setUncaughtExceptionHandler((th, e) -> crashed.put(th.getName(), e));
    t.start();
    threads.add(t);
  }

  /**
   * Waits until both threads ended (they stop at the end of the run, and drain for at most a
   * minute), and returns what the client got.
   *
   * @throws IllegalStateException if a thread died of an exception, or is still running two minutes
   *     after the end
   */
  GreedyCounts join() throws InterruptedException {
    for (Thread t : threads) {
      t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime()) + 120_000));
      if (t.isAlive()) {
        throw new IllegalStateException(t.getName() + " still runs two minutes after the end");
      }
    }
    if (!crashed.isEmpty()) {
      Map.Entry<String, Throwable> first = crashed.entrySet().iterator().next();
      throw new IllegalStateException(
          "the greedy client died: " + first.getKey() + ": " + first.getValue(), first.getValue());
    }
    return tally.counts();
  }

  @Override
  public void close() {
    threads.forEach(Thread::interrupt);
    client.close();
    channels.values().forEach(ManagedChannel::shutdownNow);
  }

  private boolean running() {
    return System.nanoTime() < end && !Thread.currentThread().isInterrupted();
  }

  private void rounds() {
    Random random = new Random(seed * 31 + 7_919);
    try {
      for (int round = 0; running(); round++) {
        pipeline();
        sessions(random);
        kv(round, random);
        keys(round);
        Thread.sleep(ROUND_PAUSE_MIN.toMillis() + random.nextInt(1_000));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Appends with the whole window in flight for {@link #PIPELINE_SPAN}, then deletes the list. */
  private void pipeline() throws InterruptedException {
    Semaphore slots = new Semaphore(WINDOW);
    long stop = Math.min(end, System.nanoTime() + PIPELINE_SPAN.toNanos());
    byte[] element = "greedy".getBytes(StandardCharsets.UTF_8);
    String list = PREFIX + "list";
    while (System.nanoTime() < stop) {
      if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
        continue;
      }
      try {
        client
            .appendAsync(list, element)
            .whenComplete(
                (n, e) -> {
                  tally.answered(e);
                  slots.release();
                });
      } catch (IdemException e) {
        tally.answered(e);
        slots.release();
      }
    }
    if (slots.tryAcquire(WINDOW, 2 * CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)) {
      slots.release(WINDOW);
    }
    call(() -> client.delete(list));
  }

  /** Registers sessions until refused, then closes them. */
  private void sessions(Random random) {
    List<Registered> open = new ArrayList<>();
    for (int i = 0; i < FILL_CAP && running(); i++) {
      Registered s = register(random.nextLong(), SESSION_TTL_MS);
      if (s == null) {
        break;
      }
      open.add(s);
    }
    for (Registered s : open) {
      closeQuietly(s);
    }
  }

  /** Writes new keys until refused, then deletes them. */
  private void kv(int round, Random random) {
    byte[] value = new byte[round % 2 == 0 ? BIG_VALUE_BYTES : SMALL_VALUE_BYTES];
    random.nextBytes(value);
    List<String> written = new ArrayList<>();
    for (int i = 0; i < FILL_CAP && running(); i++) {
      String key = PREFIX + "kv/" + round + "/" + i;
      written.add(key); // even an unknown outcome may have written it
      if (!call(() -> client.put(key, value))) {
        break;
      }
    }
    for (String key : written) {
      call(() -> client.delete(key));
    }
  }

  /** Acquires new idempotency keys until refused, then releases them. */
  private void keys(int round) {
    Map<String, Long> tokens = new LinkedHashMap<>();
    for (int i = 0; i < FILL_CAP && running(); i++) {
      String key = "r" + round + "-" + i;
      KeyAcquisition[] got = new KeyAcquisition[1];
      boolean refused =
          !call(
              () ->
                  got[0] =
                      client.acquireKey(
                          SCOPE, key, FINGERPRINT, Duration.ofSeconds(10), Duration.ofSeconds(10)));
      if (refused) {
        break;
      }
      if (got[0] instanceof KeyAcquisition.Acquired a) {
        tokens.put(key, a.token());
      }
    }
    tokens.forEach((key, token) -> call(() -> client.releaseKey(SCOPE, key, token)));
  }

  /**
   * Runs one blocking call and counts its outcome; returns false if it was refused at a quota or at
   * the backend budget (the fill is over), true otherwise.
   */
  private boolean call(Runnable call) {
    try {
      call.run();
      tally.answered(null);
      return true;
    } catch (IdemException e) {
      tally.answered(e);
      return !(e instanceof QuotaExceededException || e instanceof NoSpaceException);
    }
  }

  /** A session registered by hand, and the server that granted it. */
  private record Registered(RegisterReply grant, String server) {}

  /**
   * Registers a session at the leader (following NOT_LEADER hints), counting the outcome; null if
   * it was not granted.
   */
  private Registered register(long nonce, long ttlMs) {
    RegisterRequest request = RegisterRequest.newBuilder().setTtlMs(ttlMs).setNonce(nonce).build();
    String server = leader;
    for (int attempt = 0; attempt < 2 * servers.size(); attempt++) {
      RegisterReply reply;
      try {
        reply =
            IdemGrpc.newBlockingStub(channel(server))
                .withDeadlineAfter(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS)
                .register(request);
      } catch (RuntimeException e) {
        tally.other("Register " + Status.fromThrowable(e).getCode());
        server = next(server);
        continue;
      }
      if (reply.getCode() == Code.NOT_LEADER) {
        server = reply.getLeaderHint().isEmpty() ? next(server) : reply.getLeaderHint();
        continue;
      }
      leader = server;
      tally.refused(reply.getCode(), reply.getMessage());
      return reply.getCode() == Code.OK ? new Registered(reply, server) : null;
    }
    return null;
  }

  private String next(String server) {
    int i = servers.indexOf(server);
    return servers.get((i + 1) % servers.size());
  }

  private static ClientFrame hello(RegisterReply grant) {
    return ClientFrame.newBuilder()
        .setHello(
            Hello.newBuilder()
                .setClientId(grant.getClientId())
                .setEpoch(grant.getEpoch())
                .setSecretHi(grant.getSecretHi())
                .setSecretLo(grant.getSecretLo()))
        .build();
  }

  private static final ClientFrame CLOSE =
      ClientFrame.newBuilder().setClose(CloseSession.getDefaultInstance()).build();

  /** Ends a session (Hello, CloseSession, half-close); one left open expires after its TTL. */
  private void closeQuietly(Registered s) {
    try {
      StreamObserver<ClientFrame> out =
          IdemGrpc.newStub(channel(s.server()))
              .session(
                  new StreamObserver<>() {
                    @Override
                    public void onNext(ServerFrame f) {}

                    @Override
                    public void onError(Throwable t) {}

                    @Override
                    public void onCompleted() {}
                  });
      out.onNext(hello(s.grant()));
      out.onNext(CLOSE);
      out.onCompleted();
    } catch (RuntimeException e) {
      tally.other("close " + Status.fromThrowable(e).getCode());
    }
  }

  private void neverReadingStreams() {
    Random random = new Random(seed * 31 + 7_927);
    try {
      while (running()) {
        completeStreamKey();
        Registered s = register(random.nextLong(), 3 * STREAM_SPAN.toMillis());
        if (s == null) {
          Thread.sleep(1_000);
          continue;
        }
        neverRead(s);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** Makes sure the key the stream's requests acquire is completed with its big response. */
  private void completeStreamKey() {
    byte[] response = new byte[STREAM_ANSWER_BYTES];
    call(
        () -> {
          KeyAcquisition a =
              client.acquireKey(
                  SCOPE, STREAM_KEY, FINGERPRINT, Duration.ofSeconds(10), Duration.ofDays(1));
          if (a instanceof KeyAcquisition.Acquired acquired) {
            client.completeKey(SCOPE, STREAM_KEY, acquired.token(), response);
          }
        });
  }

  /**
   * One never-reading stream on session {@code s}: a request every {@value #STREAM_PERIOD_MS} ms,
   * each acknowledging the answers before it, for {@link #STREAM_SPAN}, no answer read; then reads
   * what piled up and counts how the stream ended.
   */
  private void neverRead(Registered s) throws InterruptedException {
    CountDownLatch ended = new CountDownLatch(1);
    AtomicReference<Status> how = new AtomicReference<>();
    ClientResponseObserver<ClientFrame, ServerFrame> in =
        new ClientResponseObserver<>() {
          @Override
          public void beforeStart(ClientCallStreamObserver<ClientFrame> requests) {
            requests.disableAutoRequestWithInitial(0);
          }

          @Override
          public void onNext(ServerFrame f) {
            if (f.getSeq() != 0 || f.getResult().getCode() != Code.OK) {
              tally.refused(f.getResult().getCode(), f.getResult().getMessage());
            }
          }

          @Override
          public void onError(Throwable t) {
            how.set(Status.fromThrowable(t));
            ended.countDown();
          }

          @Override
          public void onCompleted() {
            how.set(Status.OK);
            ended.countDown();
          }
        };
    ClientCallStreamObserver<ClientFrame> out =
        (ClientCallStreamObserver<ClientFrame>) IdemGrpc.newStub(channel(s.server())).session(in);
    Operation op =
        Operation.newBuilder()
            .setAcquireKey(
                AcquireKey.newBuilder()
                    .setScope(SCOPE)
                    .setKey(STREAM_KEY)
                    .setFingerprint(ByteString.copyFrom(FINGERPRINT))
                    .setInProgressMs(10_000)
                    .setRetentionMs(Duration.ofDays(1).toMillis()))
            .build();
    try {
      out.onNext(hello(s.grant()));
      long stop = Math.min(end, System.nanoTime() + STREAM_SPAN.toNanos());
      // Each request acknowledges its predecessors (ack = its own number), so that the session's
      // window never holds it back: only the unread answers pile up.
      for (long seq = Math.max(1, s.grant().getNextSeq());
          System.nanoTime() < stop && ended.getCount() > 0;
          seq++) {
        out.onNext(
            ClientFrame.newBuilder()
                .setRequest(Request.newBuilder().setSeq(seq).setAck(seq).setOp(op))
                .build());
        Thread.sleep(STREAM_PERIOD_MS);
      }
      // A stream the server ended shows its status only once its answers were read.
      out.request(Integer.MAX_VALUE);
      if (ended.await(5, TimeUnit.SECONDS)) {
        Status status = how.get();
        if (status.getCode() == Status.Code.RESOURCE_EXHAUSTED
            && !String.valueOf(status.getDescription()).startsWith("too many connections")) {
          tally.cutOff();
        } else {
          tally.other("never-reading stream ended " + status.getCode());
        }
      } else {
        tally.notCut();
        out.onNext(CLOSE);
        out.onCompleted();
        if (!ended.await(5, TimeUnit.SECONDS)) {
          out.cancel("the greedy client gave up on its stream", null);
        }
      }
    } catch (RuntimeException e) {
      tally.other("never-reading stream " + Status.fromThrowable(e).getCode());
      out.cancel("the greedy client gave up on its stream", e);
    }
  }

  private ManagedChannel channel(String address) {
    return channels.computeIfAbsent(address, this::newChannel);
  }

  private ManagedChannel newChannel(String address) {
    int colon = address.lastIndexOf(':');
    NettyChannelBuilder b =
        NettyChannelBuilder.forAddress(
            address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)));
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
    } catch (SSLException e) {
      throw new IllegalStateException("cannot use the greedy client's certificate", e);
    }
  }
}
