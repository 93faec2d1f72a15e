package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.QuotaExceededException;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Permission;
import io.idem.proto.Quotas;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * One tenant fills its key quota while another acquires freely, on a 3-node TLS cluster with access
 * control: the admin sets a default quota of {@value #QUOTA} key records, tenant A fills it and is
 * refused with {@code QUOTA_EXCEEDED} naming the quota, and tenant B, whose role gives it more,
 * acquires past A's count without a refusal. Every replica agrees.
 */
@Timeout(180)
class PrincipalQuotaTest {
  static final int QUOTA = 100;

  @TempDir static Path certsDir;
  @TempDir static Path dataDir;
  static TestCertificates certs;
  static LocalCluster cluster;

  @BeforeAll
  static void start() throws Exception {
    certs = TestCertificates.create(certsDir);
    cluster = LocalCluster.start(3, dataDir, certs.securedNode("CN=admin"));
    cluster.waitForLeader(Duration.ofSeconds(60));
    try (RawSession admin = raw("admin")) {
      assertThat(
              admin
                  .configure(
                      ConfigureRequest.newBuilder()
                          .setQuotas(Quotas.newBuilder().setKeyRecords(QUOTA))
                          .build())
                  .getCode())
          .isEqualTo(Code.OK);
      role(admin, "a", Quotas.getDefaultInstance());
      role(admin, "b", Quotas.newBuilder().setKeyRecords(3L * QUOTA).build());
    }
  }

  private static void role(RawSession admin, String t, Quotas quotas) {
    Role.Builder role =
        Role.newBuilder()
            .setName("tenant-" + t)
            .addPermissions(
                Permission.newBuilder()
                    .setKind(Permission.Kind.KEY_SCOPE)
                    .setPrefix("tenant-" + t));
    if (quotas.getKeyRecords() != 0) {
      role.setQuotas(quotas);
    }
    assertThat(admin.auth(AuthRequest.newBuilder().setPutRole(role).build()).getCode())
        .isEqualTo(Code.OK);
    assertThat(
            admin
                .auth(
                    AuthRequest.newBuilder()
                        .setGrant(
                            UserRoles.newBuilder()
                                .setPrincipal("CN=tenant-" + t)
                                .addRoles("tenant-" + t))
                        .build())
                .getCode())
        .isEqualTo(Code.OK);
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static RawSession raw(String who) {
    int leader = cluster.waitForLeader(Duration.ofSeconds(30));
    return certs.rawSession(cluster.clientAddress(leader), who);
  }

  private static IdemClient client(String who) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .requestTimeout(Duration.ofSeconds(20))
        .tls(certs.clientTls(who))
        .build();
  }

  private static KeyAcquisition acquire(IdemClient c, String scope, String key) {
    return c.acquireKey(
        scope,
        key,
        "f".getBytes(StandardCharsets.UTF_8),
        Duration.ofMinutes(1),
        Duration.ofHours(1));
  }

  @Test
  void onePrincipalFillsItsKeyQuotaWhileAnotherAcquiresFreely() {
    try (IdemClient a = client("tenant-a");
        IdemClient b = client("tenant-b")) {
      for (int i = 0; i < QUOTA; i++) {
        assertThat(acquire(a, "tenant-a", "order-" + i))
            .isInstanceOf(KeyAcquisition.Acquired.class);
      }
      assertThatThrownBy(() -> acquire(a, "tenant-a", "order-" + QUOTA))
          .isInstanceOf(QuotaExceededException.class)
          .hasMessageContaining("quota key_records")
          .hasMessageContaining("CN=tenant-a")
          .hasMessageContaining(QUOTA + " key records");
      // A's own keys are answered as ever; B is not held to A's count.
      assertThat(acquire(a, "tenant-a", "order-0")).isInstanceOf(KeyAcquisition.InProgress.class);
      for (int i = 0; i < 2 * QUOTA; i++) {
        assertThat(acquire(b, "tenant-b", "order-" + i))
            .as("tenant b's key %d", i)
            .isInstanceOf(KeyAcquisition.Acquired.class);
      }
      assertThatThrownBy(() -> acquire(a, "tenant-a", "order-x"))
          .isInstanceOf(QuotaExceededException.class);
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getKeyRecords()).isEqualTo(3L * QUOTA);
      assertThat(cluster.node(i).status().getQuotas().getKeyRecords()).isEqualTo(QUOTA);
    }
  }
}
