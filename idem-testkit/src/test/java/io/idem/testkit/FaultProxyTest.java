package io.idem.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The proxy's silence modes, on plain sockets: a silenced connection stays open at both ends and
 * forwards nothing in the silenced directions, while a connection opened afterwards works.
 */
@Timeout(60)
class FaultProxyTest {
  /** How long a read waits before the test calls the connection silent. */
  private static final int SILENT_READ_MS = 300;

  private ServerSocket target;
  private final List<Socket> accepted = new CopyOnWriteArrayList<>();
  private final List<Socket> opened = new CopyOnWriteArrayList<>();
  private FaultProxy proxy;

  @BeforeEach
  void start() throws IOException {
    target = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    Thread acceptor =
        new Thread(
            () -> {
              while (!target.isClosed()) {
                try {
                  accepted.add(target.accept());
                } catch (IOException e) {
                  return; // closed
                }
              }
            },
            "fault-proxy-test-target");
    acceptor.setDaemon(true);
    acceptor.start();
    proxy = FaultProxy.start("127.0.0.1:" + target.getLocalPort());
  }

  @AfterEach
  void stop() throws IOException {
    proxy.close();
    target.close();
    for (Socket s : accepted) {
      s.close();
    }
    for (Socket s : opened) {
      s.close();
    }
  }

  /** A connection through the proxy: the client's end and the node's end. */
  private record Pair(Socket client, Socket node) {}

  private Pair connect() throws IOException {
    int before = accepted.size();
    Socket client = new Socket(InetAddress.getLoopbackAddress(), portOf(proxy.address()));
    opened.add(client);
    Socket node =
        Eventually.get(
            "the proxy connects to the target",
            Duration.ofSeconds(5),
            () -> accepted.size() > before ? accepted.get(before) : null);
    client.setSoTimeout(5_000);
    node.setSoTimeout(5_000);
    return new Pair(client, node);
  }

  private static int portOf(String address) {
    return Integer.parseInt(address.substring(address.lastIndexOf(':') + 1));
  }

  private static void send(Socket from, String text) throws IOException {
    from.getOutputStream().write(text.getBytes(StandardCharsets.US_ASCII));
    from.getOutputStream().flush();
  }

  private static String receive(Socket at, int length) throws IOException {
    byte[] buf = new byte[length];
    InputStream in = at.getInputStream();
    for (int off = 0; off < length; ) {
      int n = in.read(buf, off, length - off);
      assertThat(n).as("bytes read (-1: the connection was closed)").isPositive();
      off += n;
    }
    return new String(buf, StandardCharsets.US_ASCII);
  }

  /** Nothing arrives, and the connection is neither closed (-1) nor reset (an exception). */
  private static void assertOpenAndSilent(Socket at) throws IOException {
    at.setSoTimeout(SILENT_READ_MS);
    assertThatThrownBy(() -> at.getInputStream().read())
        .as("a read on a silenced, open connection")
        .isInstanceOf(SocketTimeoutException.class);
    at.setSoTimeout(5_000);
  }

  private void awaitSilenced(long bytes) {
    Eventually.until(
        "the proxy dropped " + bytes + " bytes",
        Duration.ofSeconds(5),
        () -> proxy.silencedBytes() == bytes);
  }

  private static void assertBothWaysWork(Pair p) throws IOException {
    send(p.client(), "ping");
    assertThat(receive(p.node(), 4)).isEqualTo("ping");
    send(p.node(), "pong");
    assertThat(receive(p.client(), 4)).isEqualTo("pong");
  }

  @Test
  void silencedConnectionStaysOpenAndDropsBothWaysWhileANewOneWorks() throws IOException {
    Pair old = connect();
    assertBothWaysWork(old);

    proxy.silenceOpenConnections();
    send(old.client(), "abc");
    awaitSilenced(3);
    send(old.node(), "defg");
    awaitSilenced(7);
    assertOpenAndSilent(old.node());
    assertOpenAndSilent(old.client());

    Pair fresh = connect();
    assertBothWaysWork(fresh);
    assertThat(proxy.acceptedConnections()).isEqualTo(2);
    assertThat(proxy.silencedBytes()).isEqualTo(7);

    // An end of stream is dropped too: the node is not told that the client closed.
    old.client().close();
    assertOpenAndSilent(old.node());
  }

  @Test
  void silencedRequestsAreDroppedWhileResponsesFlow() throws IOException {
    Pair old = connect();
    assertBothWaysWork(old);

    proxy.silenceRequestsOnOpenConnections();
    send(old.client(), "abc");
    awaitSilenced(3);
    assertOpenAndSilent(old.node());
    send(old.node(), "pong");
    assertThat(receive(old.client(), 4)).isEqualTo("pong");

    assertBothWaysWork(connect());
    assertThat(proxy.acceptedConnections()).isEqualTo(2);
  }

  @Test
  void silencedResponsesAreDroppedWhileRequestsFlow() throws IOException {
    Pair old = connect();
    assertBothWaysWork(old);

    proxy.silenceResponsesOnOpenConnections();
    send(old.node(), "abc");
    awaitSilenced(3);
    assertOpenAndSilent(old.client());
    send(old.client(), "ping");
    assertThat(receive(old.node(), 4)).isEqualTo("ping");

    assertBothWaysWork(connect());
    assertThat(proxy.acceptedConnections()).isEqualTo(2);
  }

  @Test
  void resetEndsSilencedConnections() throws IOException {
    Pair old = connect();
    assertBothWaysWork(old); // the proxy holds the connection by now
    proxy.silenceOpenConnections();
    proxy.resetConnections();
    old.client().setSoTimeout(5_000);
    assertThatThrownBy(
            () -> {
              // A reset shows as an exception, or as the end of the stream on some platforms.
              if (old.client().getInputStream().read() < 0) {
                throw new IOException("end of stream");
              }
            })
        .isInstanceOf(IOException.class)
        .isNotInstanceOf(SocketTimeoutException.class);
  }

  private static void assertReset(Socket at) throws IOException {
    at.setSoTimeout(5_000);
    assertThatThrownBy(
            () -> {
              // A reset shows as an exception, or as the end of the stream on some platforms.
              if (at.getInputStream().read() < 0) {
                throw new IOException("end of stream");
              }
            })
        .isInstanceOf(IOException.class)
        .isNotInstanceOf(SocketTimeoutException.class);
  }

  @Test
  void partitionDropsOpenAndNewConnectionsUntilHealedThenResetsTheDamagedOnes() throws IOException {
    Pair old = connect();
    assertBothWaysWork(old);

    proxy.partition();
    assertThat(proxy.partitioned()).isTrue();
    send(old.client(), "abc");
    awaitSilenced(3);
    assertOpenAndSilent(old.node());
    Pair during = connect(); // accepted (the proxy is local), then silent
    send(during.node(), "de");
    awaitSilenced(5);
    assertOpenAndSilent(during.client());
    Pair untouched = connect(); // opened during the partition, sent nothing

    assertThat(proxy.heal()).as("connections that lost bytes, reset").isEqualTo(2);
    assertThat(proxy.partitioned()).isFalse();
    assertReset(old.client());
    assertReset(during.node());
    assertBothWaysWork(untouched);
    assertBothWaysWork(connect());
  }

  @Test
  void oneWayPartitionDropsRequestsWhileResponsesFlow() throws IOException {
    Pair p = connect();
    proxy.partitionRequests();
    send(p.client(), "abc");
    awaitSilenced(3);
    assertOpenAndSilent(p.node());
    send(p.node(), "pong");
    assertThat(receive(p.client(), 4)).isEqualTo("pong");
    Pair fresh = connect();
    send(fresh.node(), "pong");
    assertThat(receive(fresh.client(), 4)).isEqualTo("pong");
    proxy.heal();
    assertReset(p.client());
    assertBothWaysWork(fresh); // it lost nothing
  }

  @Test
  void oneWayPartitionDropsResponsesWhileRequestsFlow() throws IOException {
    Pair p = connect();
    proxy.partitionResponses();
    send(p.node(), "abc");
    awaitSilenced(3);
    assertOpenAndSilent(p.client());
    send(p.client(), "ping");
    assertThat(receive(p.node(), 4)).isEqualTo("ping");
    proxy.heal();
    assertReset(p.node());
    assertBothWaysWork(connect());
  }
}
