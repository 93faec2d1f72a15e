package io.idem.testkit;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.ChangeMembersReply;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.ConfigureReply;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.GetRequest;
import io.idem.proto.Hello;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.RequestBatch;
import io.idem.proto.ServerFrame;
import io.idem.proto.SessionKeepAlive;
import io.idem.proto.StatusReply;
import io.idem.proto.StatusRequest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import javax.net.ssl.SSLException;

/**
 * The client protocol by hand, for tests that must send exactly the frames they choose (a duplicate
 * to a new leader, a wrong secret, a session left without keep-alives). {@link
 * io.idem.client.IdemClient} is the real client.
 */
public final class RawSession implements AutoCloseable {
  private final ManagedChannel channel;
  private final io.grpc.Channel calls; // the channel, with the group's header if one is named
  private final LinkedBlockingQueue<ServerFrame> frames = new LinkedBlockingQueue<>();
  private StreamObserver<ClientFrame> stream;
  private volatile CountDownLatch ended = new CountDownLatch(1);

  /** A connection to {@code address} (host:port); nothing is sent yet. */
  public RawSession(String address) {
    this(address, -1);
  }

  /**
   * A connection to {@code address} whose calls name Raft group {@code group} (the {@code
   * idem-group} header; -1: none, as a client of a cluster of one group).
   */
  public RawSession(String address, int group) {
    int colon = address.lastIndexOf(':');
    this.channel =
        NettyChannelBuilder.forAddress(
                address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))
            .usePlaintext()
            .build();
    this.calls = withGroup(channel, group);
  }

  private static io.grpc.Channel withGroup(ManagedChannel channel, int group) {
    if (group < 0) {
      return channel;
    }
    return io.grpc.ClientInterceptors.intercept(channel, io.idem.proto.GroupHeader.naming(group));
  }

  /**
   * A connection to {@code address} over TLS, trusting the certificates in {@code ca} and
   * presenting {@code certificate} with {@code key} (PEM files) as the client's.
   */
  public RawSession(String address, Path ca, Path certificate, Path key) {
    this(address, -1, ca, certificate, key);
  }

  /**
   * A connection to {@code address} over TLS ({@link #RawSession(String, Path, Path, Path)}) whose
   * calls name Raft group {@code group} (-1: none).
   */
  public RawSession(String address, int group, Path ca, Path certificate, Path key) {
    int colon = address.lastIndexOf(':');
    try {
      this.channel =
          NettyChannelBuilder.forAddress(
                  address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))
              .sslContext(
                  GrpcSslContexts.forClient()
                      .trustManager(ca.toFile())
                      .keyManager(certificate.toFile(), key.toFile())
                      .build())
              .build();
    } catch (SSLException e) {
      throw new IllegalArgumentException("cannot use the TLS files: " + e.getMessage(), e);
    }
    this.calls = withGroup(channel, group);
  }

  /** Sends a Register RPC and returns the reply. */
  public RegisterReply register(RegisterRequest request) {
    return IdemGrpc.newBlockingStub(calls)
        .withDeadlineAfter(10, TimeUnit.SECONDS)
        .register(request);
  }

  /**
   * Registers a new anonymous session with a TTL of a minute and {@code nonce}, and returns its
   * grant.
   *
   * @throws IllegalStateException if the registration is refused
   */
  public RegisterReply registerSession(long nonce) {
    RegisterReply grant =
        register(RegisterRequest.newBuilder().setTtlMs(60_000).setNonce(nonce).build());
    if (grant.getCode() != Code.OK) {
      throw new IllegalStateException(
          "registration refused: " + grant.getCode() + " " + grant.getMessage());
    }
    return grant;
  }

  /** Sends a Configure RPC (a change of the replicated configuration) and returns the reply. */
  public ConfigureReply configure(ConfigureRequest request) {
    return IdemGrpc.newBlockingStub(calls)
        .withDeadlineAfter(10, TimeUnit.SECONDS)
        .configure(request);
  }

  /** Sends an Auth RPC (a read or change of access control) and returns the reply. */
  public AuthReply auth(AuthRequest request) {
    return IdemGrpc.newBlockingStub(calls).withDeadlineAfter(10, TimeUnit.SECONDS).auth(request);
  }

  /** Sends a ChangeMembers RPC and returns the reply. */
  public ChangeMembersReply changeMembers(ChangeMembersRequest request) {
    return IdemGrpc.newBlockingStub(calls)
        .withDeadlineAfter(30, TimeUnit.SECONDS)
        .changeMembers(request);
  }

  /** Sends a Get RPC (a linearizable read) and returns the reply. */
  public GetReply get(String key) {
    return IdemGrpc.newBlockingStub(calls)
        .withDeadlineAfter(10, TimeUnit.SECONDS)
        .get(GetRequest.newBuilder().setKey(key).build());
  }

  /** Sends a GetKey RPC (a read of an idempotency key's record) and returns the reply. */
  public GetKeyReply getKey(String scope, String key) {
    return IdemGrpc.newBlockingStub(calls)
        .withDeadlineAfter(10, TimeUnit.SECONDS)
        .getKey(GetKeyRequest.newBuilder().setScope(scope).setKey(key).build());
  }

  /** Sends a Status RPC and returns the reply. */
  public StatusReply status() {
    return IdemGrpc.newBlockingStub(calls)
        .withDeadlineAfter(10, TimeUnit.SECONDS)
        .status(StatusRequest.getDefaultInstance());
  }

  /** Opens the session stream and sends the Hello of {@code session}. */
  public void open(long clientId, long epoch, long secretHi, long secretLo) {
    open(clientId, epoch, secretHi, secretLo, false);
  }

  /**
   * Opens the session stream and sends a Hello that says whether this client takes several answers
   * in one frame ({@code batches}): the frames then come as the server sends them, a batch as one.
   */
  public void open(long clientId, long epoch, long secretHi, long secretLo, boolean batches) {
    open(
        Hello.newBuilder()
            .setClientId(clientId)
            .setEpoch(epoch)
            .setSecretHi(secretHi)
            .setSecretLo(secretLo)
            .setBatches(batches)
            .build());
  }

  /** Opens the session stream and sends {@code hello}, as it is. */
  public void open(Hello hello) {
    CountDownLatch streamEnded = new CountDownLatch(1);
    ended = streamEnded;
    stream =
        IdemGrpc.newStub(calls)
            .session(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ServerFrame f) {
                    frames.add(f);
                  }

                  @Override
                  public void onError(Throwable t) {
                    streamEnded.countDown();
                  }

                  @Override
                  public void onCompleted() {
                    streamEnded.countDown();
                  }
                });
    stream.onNext(ClientFrame.newBuilder().setHello(hello).build());
  }

  /** {@link #open(long, long, long, long)} with a registration's grant. */
  public void open(RegisterReply grant) {
    open(grant, false);
  }

  /** {@link #open(long, long, long, long, boolean)} with a registration's grant. */
  public void open(RegisterReply grant, boolean batches) {
    open(grant.getClientId(), grant.getEpoch(), grant.getSecretHi(), grant.getSecretLo(), batches);
  }

  /** Sends {@code requests} in one frame (ClientFrame.requests), in their order. */
  public void sendAll(List<Request> requests) {
    stream.onNext(
        ClientFrame.newBuilder()
            .setRequests(RequestBatch.newBuilder().addAllRequests(requests))
            .build());
  }

  /** Sends request {@code seq} with {@code ack}. */
  public void send(long seq, long ack, Operation op) {
    stream.onNext(
        ClientFrame.newBuilder()
            .setRequest(Request.newBuilder().setSeq(seq).setAck(ack).setOp(op))
            .build());
  }

  /** Sends a keep-alive with {@code ack}. */
  public void keepAlive(long ack) {
    stream.onNext(
        ClientFrame.newBuilder().setKeepAlive(SessionKeepAlive.newBuilder().setAck(ack)).build());
  }

  /** Half-closes the stream: no more frames from this side; the server's may still come. */
  public void halfClose() {
    stream.onCompleted();
  }

  /** Whether the server ended the current stream within {@code timeout}. */
  public boolean awaitEnd(Duration timeout) {
    try {
      return ended.await(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** A frame already received, or null if none is waiting. */
  public ServerFrame poll() {
    return frames.poll();
  }

  /** The next frame if one comes within {@code timeout}, else null. */
  public ServerFrame poll(Duration timeout) {
    try {
      return frames.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /** The next frame from the server, or an AssertionError after 10 s. */
  public ServerFrame next() {
    try {
      ServerFrame f = frames.poll(10, TimeUnit.SECONDS);
      if (f == null) {
        throw new AssertionError("no frame from the server within 10 s");
      }
      return f;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError("interrupted", e);
    }
  }

  /**
   * The next frame answering request {@code seq}. Keep-alive answers (seq 0, OK) are skipped; a
   * stream-level refusal (seq 0, any other code) is returned, since no answer will follow it.
   */
  public ServerFrame answerTo(long seq) {
    while (true) {
      ServerFrame f = next();
      if (f.getSeq() == seq || (f.getSeq() == 0 && f.getResult().getCode() != Code.OK)) {
        return f;
      }
    }
  }

  @Override
  public void close() {
    if (stream != null) {
      try {
        stream.onCompleted();
      } catch (RuntimeException ignored) {
        // the channel goes away anyway
      }
    }
    channel.shutdownNow();
  }
}
