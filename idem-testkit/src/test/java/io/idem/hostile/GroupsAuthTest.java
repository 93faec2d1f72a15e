package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.NotSentException;
import io.idem.client.PermissionDeniedException;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.Partitions;
import io.idem.proto.Permission;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Access control in a cluster of several groups: each group holds the roles it decides by, so a
 * grant goes to every group (as {@code idem auth} sends it). A principal that holds no role is
 * refused by the metadata group at registration, and the client says so at once, with the server's
 * reason, instead of waiting out its timeout; once granted in every group, the same principal
 * writes to every group.
 */
@Timeout(180)
class GroupsAuthTest {
  private static final int GROUPS = 2;

  @TempDir Path dir;

  @Test
  void aPrincipalWithoutARoleIsToldWhyAndOnceGrantedInEveryGroupWritesToEach() throws Exception {
    TestCertificates certs = TestCertificates.create(Files.createDirectories(dir.resolve("certs")));
    try (LocalCluster c =
        LocalCluster.start(
            3, dir.resolve("c"), b -> certs.securedNode("CN=admin").apply(b).groups(GROUPS))) {
      c.waitForLeader(Duration.ofSeconds(60));
      // The timeout is long on purpose: the refusal must not wait for it.
      assertThatThrownBy(() -> client(c, certs).put("k", bytes("v")))
          .isInstanceOf(NotSentException.class)
          .hasMessageContaining("the metadata group (0) refused this client")
          .hasMessageContaining("PERMISSION_DENIED")
          .hasMessageContaining("CN=client holds no role")
          .hasRootCauseInstanceOf(PermissionDeniedException.class);

      Role role =
          Role.newBuilder()
              .setName("writer")
              .addPermissions(
                  Permission.newBuilder().setKind(Permission.Kind.KV_READ_WRITE).setPrefix(""))
              .build();
      for (int g = 0; g <= GROUPS; g++) {
        grant(c, certs, g, AuthRequest.newBuilder().setPutRole(role).build());
        grant(
            c,
            certs,
            g,
            AuthRequest.newBuilder()
                .setGrant(UserRoles.newBuilder().setPrincipal("CN=client").addRoles("writer"))
                .build());
      }
      try (IdemClient client = client(c, certs)) {
        for (int g = 1; g <= GROUPS; g++) {
          String key = keyIn(g);
          client.put(key, bytes("in group " + g));
          assertThat(client.get(key).map(KeyValue::value).map(GroupsAuthTest::text))
              .contains("in group " + g);
        }
      }
    }
  }

  private static IdemClient client(LocalCluster c, TestCertificates certs) {
    return IdemClient.builder()
        .servers(c.clientAddresses())
        .requestTimeout(Duration.ofSeconds(60))
        .tls(certs.clientTls("client"))
        .build();
  }

  /** Sends an access-control change to group {@code g}'s leader, as the admin, until it is OK. */
  private static void grant(LocalCluster c, TestCertificates certs, int g, AuthRequest change) {
    Eventually.until(
        "group " + g + " takes " + change.getChangeCase(),
        Duration.ofSeconds(30),
        () -> {
          for (int i = 0; i < 3; i++) {
            if (c.node(i).isLeader(g)) {
              try (RawSession admin = certs.rawSession(c.clientAddress(i), g, "admin")) {
                return admin.auth(change).getCode() == Code.OK;
              }
            }
          }
          return false;
        });
  }

  private static String keyIn(int group) {
    for (int i = 0; ; i++) {
      String k = "k-" + i;
      if (Partitions.groupOf(Partitions.of(k), GROUPS) == group) {
        return k;
      }
    }
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  private static String text(byte[] b) {
    return new String(b, StandardCharsets.UTF_8);
  }
}
