package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.idem.client.IdemClient;
import io.idem.proto.ClientFrame;
import io.idem.proto.IdemGrpc;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusRequest;
import io.idem.server.ConnectionLimits;
import io.idem.server.IdemServer;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The client port's connection bounds ({@link ConnectionLimits}), each at its edge on a one-node
 * cluster: connections per client (certificate subject under TLS, IP address in plaintext), calls
 * per connection, the idle bound, and the age bound with its grace, which the Idem client rides
 * through without an error.
 */
@Timeout(90)
class ConnectionLimitsTest {
  @TempDir Path dir;

  /** A one-node plaintext cluster whose client port has {@code limits}. */
  private LocalCluster node(ConnectionLimits limits) {
    LocalCluster c = LocalCluster.start(1, dir, b -> b.connectionLimits(limits));
    c.waitForLeader(Duration.ofSeconds(30));
    return c;
  }

  private static ManagedChannel plaintext(String address) {
    int colon = address.lastIndexOf(':');
    return NettyChannelBuilder.forAddress(
            address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))
        .usePlaintext()
        .build();
  }

  private static void status(ManagedChannel channel, long deadlineMs) {
    IdemGrpc.newBlockingStub(channel)
        .withDeadlineAfter(deadlineMs, TimeUnit.MILLISECONDS)
        .status(StatusRequest.getDefaultInstance());
  }

  /** The value of the gauge or counter {@code name} of {@code node}. */
  private static double meter(IdemServer node, String name) {
    var m = node.meterRegistry().find(name);
    if (m.gauge() != null) {
      return m.gauge().value();
    }
    return m.counter() != null ? m.counter().count() : m.functionCounter().count();
  }

  @Test
  void aFloodFromOneCertificateIsRefusedPastTheBoundWhileAnotherStillConnects(
      @TempDir Path certsDir) throws Exception {
    TestCertificates certs = TestCertificates.create(certsDir);
    List<RawSession> flood = new ArrayList<>();
    try (LocalCluster cluster =
        LocalCluster.start(
            1,
            dir,
            b ->
                certs
                    .securedNode("CN=admin")
                    .apply(b)
                    .connectionLimits(ConnectionLimits.DEFAULTS.withMaxConnectionsPerClient(3)))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      String address = cluster.clientAddress(0);
      for (int i = 0; i < 3; i++) {
        RawSession s = as(certs, address, "tenant-a");
        flood.add(s);
        assertThat(s.status().getId())
            .as("connection %d is within the bound", i + 1)
            .isEqualTo("n1");
      }
      for (int i = 0; i < 5; i++) {
        RawSession s = as(certs, address, "tenant-a");
        flood.add(s);
        assertThatThrownBy(s::status)
            .isInstanceOfSatisfying(
                StatusRuntimeException.class,
                e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED))
            .hasMessageContaining(
                "too many connections from CN=tenant-a: at most 3 (--max-connections-per-client)");
      }
      try (RawSession other = as(certs, address, "tenant-b")) {
        assertThat(other.status().getId())
            .as("another certificate has its own count")
            .isEqualTo("n1");
      }
      assertThat(meter(cluster.node(0), "idem.client.connections.refused")).isEqualTo(5);

      flood.remove(0).close();
      try (RawSession again = as(certs, address, "tenant-a")) {
        Eventually.until(
            "a closed connection frees its place",
            Duration.ofSeconds(10),
            () -> {
              try {
                again.status();
                return true;
              } catch (StatusRuntimeException e) {
                return false; // this connection was refused; a later one may be served
              }
            });
      }
    } finally {
      flood.forEach(RawSession::close);
    }
  }

  private static RawSession as(TestCertificates certs, String address, String who) {
    return new RawSession(address, certs.certificate("ca"), certs.certificate(who), certs.key(who));
  }

  @Test
  void inPlaintextTheBoundIsPerAddress() throws Exception {
    List<ManagedChannel> channels = new ArrayList<>();
    try (LocalCluster cluster = node(ConnectionLimits.DEFAULTS.withMaxConnectionsPerClient(2))) {
      for (int i = 0; i < 3; i++) {
        channels.add(plaintext(cluster.clientAddress(0)));
      }
      status(channels.get(0), 5_000);
      status(channels.get(1), 5_000);
      assertThatThrownBy(() -> status(channels.get(2), 5_000))
          .hasMessage(
              "RESOURCE_EXHAUSTED: too many connections from 127.0.0.1: at most 2"
                  + " (--max-connections-per-client)");
      assertThat(meter(cluster.node(0), "idem.client.connections")).isEqualTo(2);
    } finally {
      channels.forEach(ManagedChannel::shutdownNow);
    }
  }

  @Test
  void callsPastTheStreamBoundWaitInTheClientUntilOneEnds() throws Exception {
    ManagedChannel channel = null;
    List<StreamObserver<ClientFrame>> streams = new ArrayList<>();
    try (LocalCluster cluster = node(ConnectionLimits.DEFAULTS.withMaxCallsPerConnection(2))) {
      channel = plaintext(cluster.clientAddress(0));
      status(channel, 5_000); // connected: the client knows the server's MAX_CONCURRENT_STREAMS
      for (int i = 0; i < 2; i++) {
        streams.add(IdemGrpc.newStub(channel).session(new Ignored()));
      }
      ManagedChannel c = channel;
      long start = System.nanoTime();
      assertThatThrownBy(() -> status(c, 1_500))
          .as("a third call is queued by the client, not refused by the server")
          .isInstanceOfSatisfying(
              StatusRuntimeException.class,
              e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.DEADLINE_EXCEEDED));
      assertThat(Duration.ofNanos(System.nanoTime() - start))
          .isGreaterThan(Duration.ofMillis(1_400));

      streams.remove(0).onError(Status.CANCELLED.asRuntimeException());
      // The slot frees once the server has closed the cancelled stream too; until then a call may
      // still wait in the client.
      long cancelled = System.nanoTime();
      Eventually.until(
          "a call goes through once a stream ended",
          Duration.ofSeconds(20),
          () -> {
            try {
              status(c, 1_000);
              return true;
            } catch (StatusRuntimeException e) {
              return false;
            }
          });
      System.out.printf(
          "a call went through %d ms after the stream was cancelled%n",
          TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - cancelled));
    } finally {
      streams.forEach(s -> s.onError(Status.CANCELLED.asRuntimeException()));
      if (channel != null) {
        channel.shutdownNow();
      }
    }
  }

  @Test
  void aConnectionWithoutCallsIsClosedAfterTheIdleBound() throws Exception {
    ManagedChannel channel = null;
    try (LocalCluster cluster = node(ConnectionLimits.DEFAULTS.withMaxConnectionIdleMs(1_500))) {
      channel = plaintext(cluster.clientAddress(0));
      status(channel, 5_000);
      long idleSince = System.nanoTime();
      assertThat(channel.getState(false)).isEqualTo(ConnectivityState.READY);
      ManagedChannel c = channel;
      Eventually.until(
          "the server closed the idle connection",
          Duration.ofSeconds(8),
          () -> c.getState(false) != ConnectivityState.READY);
      assertThat(Duration.ofNanos(System.nanoTime() - idleSince))
          .as("not before the bound")
          .isGreaterThan(Duration.ofMillis(1_400));
      Eventually.until(
          "the node counts it closed",
          Duration.ofSeconds(5),
          () -> meter(cluster.node(0), "idem.client.connections") == 0);
      status(channel, 5_000); // and the client simply reconnects
    } finally {
      if (channel != null) {
        channel.shutdownNow();
      }
    }
  }

  @Test
  void aSessionStreamIsCutAfterTheMaxAgeAndItsGrace() throws Exception {
    long age = 1_500;
    long grace = 1_500;
    try (LocalCluster cluster = node(ConnectionLimits.DEFAULTS.withMaxConnectionAgeMs(age, grace));
        RawSession session = new RawSession(cluster.clientAddress(0))) {
      long start = System.nanoTime();
      session.open(session.registerSession(1));
      // grpc-java jitters the age by +-10%; the grace then runs from the second GOAWAY.
      long earliest = start + TimeUnit.MILLISECONDS.toNanos((long) (age * 0.9) + grace);
      assertThat(session.awaitEnd(Duration.ofNanos(earliest - System.nanoTime() - 200_000_000)))
          .as("the stream lives through the grace")
          .isFalse();
      assertThat(session.awaitEnd(Duration.ofSeconds(5))).as("then it is cut").isTrue();
      assertThat(Duration.ofNanos(System.nanoTime() - start))
          .isLessThan(Duration.ofMillis((long) (age * 1.1) + grace + 3_000));
    }
  }

  @Test
  void theIdemClientWritesThroughMaxAgeCutsWithoutAnError() throws Exception {
    try (LocalCluster cluster = node(ConnectionLimits.DEFAULTS.withMaxConnectionAgeMs(2_000, 200));
        IdemClient client =
            IdemClient.builder()
                .servers(cluster.clientAddresses())
                .requestTimeout(Duration.ofSeconds(20))
                .build()) {
      IdemServer n = cluster.node(0);
      double openedBefore = meter(n, "idem.client.connections.opened");
      long end = System.nanoTime() + Duration.ofSeconds(6).toNanos();
      int i = 0;
      while (System.nanoTime() < end) {
        client.put("k" + (i % 50), "v" + i); // throws on any error surfaced to the caller
        i++;
      }
      assertThat(i).as("writes went on").isGreaterThan(50);
      assertThat(meter(n, "idem.client.connections.opened") - openedBefore)
          .as("the age bound cut the client's connection, at least twice in 6 s")
          .isGreaterThanOrEqualTo(2);
      assertThat(client.get("k" + ((i - 1) % 50)).orElseThrow().valueAsString())
          .isEqualTo("v" + (i - 1));
    }
  }

  /** A response observer for streams whose answers the test does not read. */
  private static final class Ignored implements StreamObserver<ServerFrame> {
    @Override
    public void onNext(ServerFrame value) {}

    @Override
    public void onError(Throwable t) {}

    @Override
    public void onCompleted() {}
  }
}
