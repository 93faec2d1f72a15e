package io.idem.client;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.IdemGrpc;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Request;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A server ends a session stream with {@code RESOURCE_EXHAUSTED} when its client reads none of the
 * answers for its stall bound (issue 32). To the client that is a broken stream like any other: it
 * reconnects and resends its unanswered requests with the same numbers, and the call completes.
 */
@Timeout(60)
class ResourceExhaustedStreamTest {

  /** A server that ends the first session stream after its first request, and answers the rest. */
  private static final class CuttingServer extends IdemGrpc.IdemImplBase {
    final List<List<Long>> seqsByStream = new CopyOnWriteArrayList<>();

    /** The shape a client asks for first: a cluster of one group, as an Idem server says it. */
    @Override
    public void status(
        io.idem.proto.StatusRequest req, StreamObserver<io.idem.proto.StatusReply> reply) {
      reply.onNext(io.idem.proto.StatusReply.getDefaultInstance());
      reply.onCompleted();
    }

    @Override
    public void register(RegisterRequest req, StreamObserver<RegisterReply> reply) {
      reply.onNext(
          RegisterReply.newBuilder()
              .setCode(Code.OK)
              .setClientId(42)
              .setEpoch(1)
              .setNextSeq(1)
              .setSecretHi(7)
              .setSecretLo(8)
              .setWindow(128)
              .build());
      reply.onCompleted();
    }

    @Override
    public StreamObserver<ClientFrame> session(StreamObserver<ServerFrame> out) {
      List<Long> seqs = new CopyOnWriteArrayList<>();
      boolean first = seqsByStream.isEmpty();
      seqsByStream.add(seqs);
      return new StreamObserver<>() {
        private boolean ended;

        @Override
        public void onNext(ClientFrame f) {
          List<Request> requests = new ArrayList<>();
          if (f.hasRequest()) {
            requests.add(f.getRequest());
          }
          requests.addAll(f.getRequests().getRequestsList());
          for (Request r : requests) {
            seqs.add(r.getSeq());
            if (ended) {
              return;
            }
            if (first) {
              ended = true;
              out.onError(
                  Status.RESOURCE_EXHAUSTED
                      .withDescription(
                          "the client read none of the 1 answers waiting on this stream for 3000"
                              + " ms (the server's --stream-stall-timeout-ms)")
                      .asRuntimeException());
            } else {
              out.onNext(
                  ServerFrame.newBuilder()
                      .setSeq(r.getSeq())
                      .setResult(Result.newBuilder().setCode(Code.OK).setRevision(10).setVersion(1))
                      .build());
            }
          }
        }

        @Override
        public void onError(Throwable t) {}

        @Override
        public void onCompleted() {
          if (!ended) {
            ended = true;
            out.onCompleted();
          }
        }
      };
    }
  }

  @Test
  @SuppressWarnings("AddressSelection") // a literal loopback address: nothing is looked up
  void aStreamEndedResourceExhaustedIsResentWithTheSameNumbersOnANewStream() throws Exception {
    CuttingServer service = new CuttingServer();
    Server server =
        NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
            .addService(service)
            .build()
            .start();
    try (IdemClient client =
        IdemClient.builder()
            .servers("127.0.0.1:" + server.getPort())
            .requestTimeout(Duration.ofSeconds(30))
            .build()) {
      WriteResult w = client.put("k", "v");
      assertThat(w.revision()).isEqualTo(10);
      assertThat(service.seqsByStream).hasSizeGreaterThanOrEqualTo(2);
      assertThat(service.seqsByStream.get(0)).as("the stream that was cut").containsExactly(1L);
      assertThat(service.seqsByStream.get(1)).as("the next stream: the resend").containsExactly(1L);
    } finally {
      server.shutdownNow();
    }
  }
}
