package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.netty.shaded.io.netty.handler.ssl.JdkSslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslProvider;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import io.idem.server.ServerConfig;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The admin HTTP port: on a TLS node it speaks HTTPS and wants a client certificate of the node's
 * CA, and it lists sessions (ids and request numbers, what a forged write would need) to admins
 * only; without TLS it may only listen on loopback.
 */
@Timeout(120)
class AdminPortTest {
  @TempDir Path certsDir;
  @TempDir Path dir;

  @Test
  void onATlsNodeOnlyAnAdminSeesSessionsAndStrangersGetNoAnswer() throws Exception {
    TestCertificates certs = TestCertificates.create(certsDir);
    try (LocalCluster cluster =
        LocalCluster.start(
            1, dir, b -> certs.securedNode("CN=admin").apply(b).adminAddress("127.0.0.1:0"))) {
      cluster.waitForLeader(Duration.ofSeconds(60));
      try (RawSession admin =
          new RawSession(
              cluster.clientAddress(0),
              certs.certificate("ca"),
              certs.certificate("admin"),
              certs.key("admin"))) {
        admin.registerSession(1);
        assertThat(
                admin
                    .auth(
                        AuthRequest.newBuilder()
                            .setPutRole(Role.newBuilder().setName("reader"))
                            .build())
                    .getCode())
            .isEqualTo(Code.OK);
        admin.auth(
            AuthRequest.newBuilder()
                .setGrant(UserRoles.newBuilder().setPrincipal("CN=tenant-a").addRoles("reader"))
                .build());
      }
      URI status = URI.create("https://127.0.0.1:" + cluster.node(0).adminPort() + "/api/status");

      String asAdmin = get(status, client(certs, "admin"));
      assertThat(asAdmin).contains("\"sessionDetails\":true").contains("\"clientId\"");
      String asTenant = get(status, client(certs, "tenant-a"));
      assertThat(asTenant)
          .contains("\"sessionDetails\":false")
          .contains("\"largestSessions\":[]")
          .doesNotContain("\"clientId\"");
      assertThatThrownBy(() -> get(status, client(certs, null)))
          .as("no client certificate: no TLS handshake")
          .isInstanceOf(java.io.IOException.class);
      assertThatThrownBy(
              () ->
                  HttpClient.newHttpClient()
                      .send(
                          HttpRequest.newBuilder(
                                  URI.create(
                                      "http://127.0.0.1:"
                                          + cluster.node(0).adminPort()
                                          + "/api/status"))
                              .build(),
                          HttpResponse.BodyHandlers.ofString()))
          .as("plain HTTP")
          .isInstanceOf(java.io.IOException.class);
    }
  }

  @Test
  void withoutTlsTheAdminPortStaysOnLoopback() {
    assertThatThrownBy(() -> ServerConfig.builder().adminAddress("0.0.0.0:9001").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a loopback address");
    assertThat(ServerConfig.builder().adminAddress("127.0.0.1:9001").build().adminAddress())
        .isEqualTo("127.0.0.1:9001");
    assertThat(ServerConfig.builder().adminAddress("localhost:9001").build().adminAddress())
        .isEqualTo("localhost:9001");
  }

  private static String get(URI uri, HttpClient client) throws Exception {
    HttpResponse<String> r =
        client.send(
            HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10)).build(),
            HttpResponse.BodyHandlers.ofString());
    assertThat(r.statusCode()).isEqualTo(200);
    return r.body();
  }

  /** An HTTPS client trusting the test CA, presenting {@code who}'s certificate (null: none). */
  private static HttpClient client(TestCertificates certs, String who) throws Exception {
    SslContextBuilder b =
        SslContextBuilder.forClient()
            .trustManager(certs.certificate("ca").toFile())
            .sslProvider(SslProvider.JDK);
    if (who != null) {
      b.keyManager(certs.certificate(who).toFile(), certs.key(who).toFile());
    }
    SSLContext context = ((JdkSslContext) b.build()).context();
    return HttpClient.newBuilder()
        .sslContext(context)
        .connectTimeout(Duration.ofSeconds(10))
        .build();
  }
}
