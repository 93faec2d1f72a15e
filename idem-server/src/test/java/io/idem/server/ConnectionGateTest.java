package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Attributes;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.Status;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The per-client connection count at its edge, without a network (ConnectionLimitsTest has one).
 */
class ConnectionGateTest {
  private final AtomicInteger refusals = new AtomicInteger();

  private static Attributes from(String ip, int port) {
    return Attributes.newBuilder()
        .set(Grpc.TRANSPORT_ATTR_REMOTE_ADDR, new InetSocketAddress(ip, port))
        .build();
  }

  @Test
  void theClientsNthConnectionIsServedTheNextIsRefusedAndAClosedOneFreesItsPlace() {
    ConnectionGate gate = new ConnectionGate(2, refusals::incrementAndGet);
    Attributes first = gate.transportReady(from("10.0.0.1", 1));
    Attributes second = gate.transportReady(from("10.0.0.1", 2));
    Attributes other = gate.transportReady(from("10.0.0.2", 1));
    assertThat(refused(gate, first)).isNull();
    assertThat(refused(gate, second)).isNull();
    assertThat(refused(gate, other)).as("another address has its own count").isNull();
    assertThat(gate.servedFor("10.0.0.1")).isEqualTo(2);

    Attributes third = gate.transportReady(from("10.0.0.1", 3));
    Status status = refused(gate, third);
    assertThat(status.getCode()).isEqualTo(Status.Code.RESOURCE_EXHAUSTED);
    assertThat(status.getDescription())
        .isEqualTo("too many connections from 10.0.0.1: at most 2 (--max-connections-per-client)");
    assertThat(refusals).hasValue(1);
    assertThat(gate.served()).as("a refused connection is not counted").isEqualTo(3);

    gate.transportTerminated(third);
    assertThat(gate.servedFor("10.0.0.1")).as("its end frees nothing").isEqualTo(2);
    gate.transportTerminated(null); // ended before its handshake completed
    gate.transportTerminated(first);
    assertThat(gate.servedFor("10.0.0.1")).isEqualTo(1);
    assertThat(refused(gate, gate.transportReady(from("10.0.0.1", 4)))).isNull();
    assertThat(gate.served()).isEqualTo(3);
  }

  @Test
  void zeroMeansNoBound() {
    ConnectionGate gate = new ConnectionGate(0, refusals::incrementAndGet);
    List<Attributes> all = new ArrayList<>();
    for (int i = 0; i < 1000; i++) {
      all.add(gate.transportReady(from("10.0.0.1", i)));
    }
    assertThat(refusals).hasValue(0);
    assertThat(gate.served()).isEqualTo(1000);
    all.forEach(gate::transportTerminated);
    assertThat(gate.served()).isZero();
    assertThat(gate.servedFor("10.0.0.1")).isZero();
  }

  /** The status a call on a transport with {@code attrs} is closed with, or null if it goes on. */
  private static Status refused(ConnectionGate gate, Attributes attrs) {
    Status[] closed = {null};
    boolean[] started = {false};
    ServerCall<InputStream, InputStream> call =
        new ServerCall<>() {
          @Override
          public void request(int numMessages) {}

          @Override
          public void sendHeaders(Metadata headers) {}

          @Override
          public void sendMessage(InputStream message) {}

          @Override
          public void close(Status status, Metadata trailers) {
            closed[0] = status;
          }

          @Override
          public boolean isCancelled() {
            return false;
          }

          @Override
          public Attributes getAttributes() {
            return attrs;
          }

          @Override
          public MethodDescriptor<InputStream, InputStream> getMethodDescriptor() {
            return null;
          }
        };
    ServerCallHandler<InputStream, InputStream> next =
        (c, h) -> {
          started[0] = true;
          return new ServerCall.Listener<InputStream>() {};
        };
    gate.interceptCall(call, new Metadata(), next);
    assertThat(started[0]).isEqualTo(closed[0] == null);
    return closed[0];
  }
}
