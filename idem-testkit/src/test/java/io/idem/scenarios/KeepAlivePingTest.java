package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.ConnectivityState;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.idem.proto.IdemGrpc;
import io.idem.proto.StatusRequest;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Clients ping idle connections (HTTP/2 keep-alive every 10 s, also without calls). A server that
 * does not permit that answers the third early ping, about 30 s in, with GOAWAY(too_many_pings) and
 * the connection drops; this server permits pings every 5 s without calls, so a connection idle for
 * 35 s stays up. (35 s because gRPC's client pings at most every 10 s and grpc-java's server
 * tolerates two early pings: a shorter test could not fail.)
 */
@Tag("slow")
@Timeout(120)
class KeepAlivePingTest {
  @TempDir Path dir;

  @Test
  void anIdleClientThatPingsEveryTenSecondsKeepsItsConnection() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      String address = cluster.clientAddress(0);
      int colon = address.lastIndexOf(':');
      ManagedChannel channel =
          NettyChannelBuilder.forAddress(
                  address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)))
              .usePlaintext()
              .keepAliveTime(10, TimeUnit.SECONDS)
              .keepAliveTimeout(5, TimeUnit.SECONDS)
              .keepAliveWithoutCalls(true)
              .build();
      try {
        IdemGrpc.newBlockingStub(channel)
            .withDeadlineAfter(10, TimeUnit.SECONDS)
            .status(StatusRequest.getDefaultInstance());
        assertThat(channel.getState(false)).isEqualTo(ConnectivityState.READY);
        List<ConnectivityState> changes = new CopyOnWriteArrayList<>();
        watch(channel, ConnectivityState.READY, changes);
        Thread.sleep(35_000);
        assertThat(changes).as("state changes while idle (GOAWAY drops the connection)").isEmpty();
        assertThat(channel.getState(false)).isEqualTo(ConnectivityState.READY);
      } finally {
        channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      }
    }
  }

  private static void watch(
      ManagedChannel channel, ConnectivityState from, List<ConnectivityState> changes) {
    channel.notifyWhenStateChanged(
        from,
        () -> {
          ConnectivityState now = channel.getState(false);
          if (now != ConnectivityState.SHUTDOWN) {
            changes.add(now);
            watch(channel, now, changes);
          }
        });
  }
}
