package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.idem.client.IdemClient;
import io.idem.client.InvalidArgumentException;
import io.idem.proto.Code;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Bad input gets clear errors, loses nothing, crashes nothing and never makes replicas diverge. */
@Timeout(120)
class BadInputTest {
  @TempDir Path dir;

  private static final Operation INCR =
      Operation.newBuilder().setIncrement(Increment.newBuilder().setKey("n").setDelta(1)).build();

  @Test
  void badInputGetsClearErrorsAndTheClusterCarriesOn() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir)) {
      Sessions.Registered reg =
          Sessions.register(
              cluster, RegisterRequest.newBuilder().setTtlMs(60_000).setNonce(5).build());
      RegisterReply grant = reg.grant();
      String leader = cluster.clientAddress(reg.leader());

      // An oversize value through the client: refused before it takes a number.
      try (IdemClient client = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        assertThatThrownBy(() -> client.put("k", new byte[1024 * 1024 + 1]))
            .isInstanceOf(InvalidArgumentException.class)
            .hasMessageContaining("limit");
        assertThatThrownBy(() -> client.put("", "v")).isInstanceOf(InvalidArgumentException.class);
        assertThat(client.increment("n", 1)).isEqualTo(1);
      }

      try (RawSession raw = new RawSession(leader)) {
        // Registration with a TTL of zero.
        RegisterReply bad = raw.register(RegisterRequest.newBuilder().setTtlMs(0).build());
        assertThat(bad.getCode()).isEqualTo(Code.INVALID_ARGUMENT);

        // An oversize value past the client's check: a saved INVALID_ARGUMENT answer that consumes
        // its number, so the session carries on.
        raw.open(grant);
        Operation big =
            Operation.newBuilder()
                .setPut(
                    Put.newBuilder()
                        .setKey("big")
                        .setValue(ByteString.copyFrom(new byte[1024 * 1024 + 1])))
                .build();
        raw.send(1, 1, big);
        ServerFrame refused = raw.answerTo(1);
        assertThat(refused.getResult().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
        assertThat(refused.getResult().getMessage()).contains("limit");
        raw.send(2, 2, INCR);
        assertThat(raw.answerTo(2).getResult().getNumber()).isEqualTo(2);
      }

      try (RawSession unknown = new RawSession(leader)) {
        unknown.open(987_654_321L, 0, 1, 2);
        assertThat(unknown.next().getResult().getCode()).isEqualTo(Code.SESSION_EXPIRED);
      }
      try (RawSession wrongSecret = new RawSession(leader)) {
        wrongSecret.open(grant.getClientId(), grant.getEpoch(), grant.getSecretHi() + 1, 0);
        assertThat(wrongSecret.next().getResult().getCode()).isEqualTo(Code.UNAUTHENTICATED);
      }

      // Garbage on the client port of every node: connections are dropped, nodes keep serving.
      Random random = new Random(7);
      for (String address : cluster.clientAddresses()) {
        int port = Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
        for (int i = 0; i < 5; i++) {
          try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            OutputStream out = s.getOutputStream();
            byte[] junk = new byte[4096];
            random.nextBytes(junk);
            out.write(
                i == 0
                    ? "GET / HTTP/1.1\r\nHost: x\r\n\r\n".getBytes(StandardCharsets.US_ASCII)
                    : junk);
            out.flush();
            assertThat(closedByPeer(s)).as("node %s closed connection %d", address, i).isTrue();
          }
        }
      }
      try (IdemClient client = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        assertThat(client.increment("n", 1)).isEqualTo(3);
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(30));
    }
  }

  /**
   * Whether the peer closes or resets the connection within 5 s, after sending what it may (an
   * HTTP/2 GOAWAY). A connection left open is false.
   */
  private static boolean closedByPeer(Socket s) throws java.io.IOException {
    s.setSoTimeout(5_000);
    byte[] buf = new byte[1024];
    try {
      for (int reads = 0; reads < 64; reads++) {
        if (s.getInputStream().read(buf) < 0) {
          return true;
        }
      }
      return false; // still talking after 64 reads: not closing
    } catch (java.net.SocketTimeoutException open) {
      return false;
    } catch (java.io.IOException reset) {
      return true;
    }
  }
}
