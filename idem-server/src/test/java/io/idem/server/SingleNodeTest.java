package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.GetRequest;
import io.idem.proto.Hello;
import io.idem.proto.IdemGrpc;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.ServerFrame;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A real single node on loopback, driven through the raw gRPC protocol. */
@Timeout(60)
class SingleNodeTest {
  @TempDir Path dir;
  private IdemServer server;
  private ManagedChannel channel;

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }

  @BeforeEach
  void start() throws Exception {
    int raft = freePort();
    int client = freePort();
    server =
        IdemServer.start(
            ServerConfig.builder()
                .dataDir(dir)
                .peers(
                    List.of(
                        new ServerConfig.Peer("n1", "127.0.0.1:" + raft, "127.0.0.1:" + client)))
                .build());
    channel = NettyChannelBuilder.forAddress("127.0.0.1", client).usePlaintext().build();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (!server.isLeader() && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    assertThat(server.isLeader()).isTrue();
  }

  @AfterEach
  void stop() throws Exception {
    channel.shutdownNow();
    server.close();
  }

  @Test
  void registerThenPipelinedIncrementsThenDuplicate() throws Exception {
    IdemGrpc.IdemBlockingStub blocking = IdemGrpc.newBlockingStub(channel);
    RegisterReply reg =
        blocking.register(RegisterRequest.newBuilder().setTtlMs(30_000).setNonce(1).build());
    assertThat(reg.getCode()).isEqualTo(Code.OK);

    LinkedBlockingQueue<ServerFrame> frames = new LinkedBlockingQueue<>();
    StreamObserver<ClientFrame> stream =
        IdemGrpc.newStub(channel)
            .session(
                new StreamObserver<>() {
                  @Override
                  public void onNext(ServerFrame f) {
                    frames.add(f);
                  }

                  @Override
                  public void onError(Throwable t) {}

                  @Override
                  public void onCompleted() {}
                });
    stream.onNext(
        ClientFrame.newBuilder()
            .setHello(
                Hello.newBuilder()
                    .setClientId(reg.getClientId())
                    .setEpoch(reg.getEpoch())
                    .setSecretHi(reg.getSecretHi())
                    .setSecretLo(reg.getSecretLo()))
            .build());
    Operation incr =
        Operation.newBuilder().setIncrement(Increment.newBuilder().setKey("c").setDelta(1)).build();
    for (int seq = 1; seq <= 100; seq++) {
      stream.onNext(
          ClientFrame.newBuilder()
              .setRequest(Request.newBuilder().setSeq(seq).setAck(1).setOp(incr))
              .build());
    }
    for (int i = 0; i < 100; i++) {
      ServerFrame f = frames.poll(10, TimeUnit.SECONDS);
      assertThat(f).isNotNull();
      assertThat(f.getResult().getCode()).isEqualTo(Code.OK);
      assertThat(f.getResult().getNumber()).isEqualTo(f.getSeq());
    }
    // Retry of request 50: the saved answer, not a 101st increment.
    stream.onNext(
        ClientFrame.newBuilder()
            .setRequest(Request.newBuilder().setSeq(50).setAck(1).setOp(incr))
            .build());
    ServerFrame dup = frames.poll(10, TimeUnit.SECONDS);
    assertThat(dup.getDuplicate()).isTrue();
    assertThat(dup.getResult().getNumber()).isEqualTo(50);
    assertThat(blocking.get(GetRequest.newBuilder().setKey("c").build()).getValue().toStringUtf8())
        .isEqualTo("100");
    assertThat(server.status().getDuplicatesSuppressed()).isEqualTo(1);
    stream.onCompleted();
  }
}
