package io.idem.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.PermissionDeniedException;
import io.idem.proto.AuthReply;
import io.idem.proto.AuthRequest;
import io.idem.proto.ChangeMembersRequest;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Limits;
import io.idem.proto.Permission;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import io.idem.testkit.TestCertificates;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The tenant matrix on a 3-node TLS cluster with access control, bootstrapped with {@code CN=admin}
 * as its admin: tenant B, holding a certificate from the same CA, cannot read, settle, take over or
 * overwrite tenant A's idempotency keys, KV values or leases, nor change the cluster; names of
 * sessions are each tenant's own; the admin changes the configuration. Every replica agrees.
 */
@Timeout(180)
class TenantIsolationTest {
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
      for (String t : List.of("a", "b")) {
        Role role =
            Role.newBuilder()
                .setName("tenant-" + t)
                .addPermissions(perm(Permission.Kind.KV_READ_WRITE, "tenant-" + t + "/"))
                .addPermissions(perm(Permission.Kind.KEY_SCOPE, "tenant-" + t))
                .addPermissions(perm(Permission.Kind.LEASE, "tenant-" + t + "/"))
                .build();
        assertThat(auth(admin, AuthRequest.newBuilder().setPutRole(role)).getCode())
            .isEqualTo(Code.OK);
        assertThat(
                auth(
                        admin,
                        AuthRequest.newBuilder()
                            .setGrant(
                                UserRoles.newBuilder()
                                    .setPrincipal("CN=tenant-" + t)
                                    .addRoles("tenant-" + t)))
                    .getCode())
            .isEqualTo(Code.OK);
      }
    }
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static Permission perm(Permission.Kind kind, String prefix) {
    return Permission.newBuilder().setKind(kind).setPrefix(prefix).build();
  }

  private static AuthReply auth(RawSession session, AuthRequest.Builder req) {
    return session.auth(req.build());
  }

  /** A raw client of the leader's client port with the certificate of {@code who}. */
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

  @Test
  void tenantBCannotReachTenantAsKeysValuesOrLeases() {
    byte[] secretAnswer = "auth code 5531 for card 4111..1111".getBytes(StandardCharsets.UTF_8);
    long token;
    try (IdemClient a = client("tenant-a")) {
      a.put("tenant-a/balance", "100");
      KeyAcquisition.Acquired acquired =
          (KeyAcquisition.Acquired)
              a.acquireKey(
                  "tenant-a",
                  "order-17",
                  new byte[0],
                  Duration.ofSeconds(30),
                  Duration.ofMinutes(5));
      token = acquired.token();
      a.grantLease("tenant-a/leader", Duration.ofSeconds(30));
      a.acquireKey(
          "tenant-a", "order-18", new byte[0], Duration.ofSeconds(30), Duration.ofMinutes(5));
      a.completeKey("tenant-a", "order-18", token + 1, secretAnswer);
    }
    try (IdemClient b = client("tenant-b")) {
      assertThatThrownBy(() -> b.get("tenant-a/balance"))
          .isInstanceOf(PermissionDeniedException.class)
          .hasMessageContaining("CN=tenant-b has no KV_READ permission for \"tenant-a/balance\"");
      assertThatThrownBy(() -> b.getKey("tenant-a", "order-18"))
          .isInstanceOf(PermissionDeniedException.class);
      assertThatThrownBy(() -> b.releaseKey("tenant-a", "order-17", token))
          .isInstanceOf(PermissionDeniedException.class);
      assertThatThrownBy(
              () ->
                  b.acquireKey(
                      "tenant-a",
                      "order-17",
                      new byte[0],
                      Duration.ofSeconds(30),
                      Duration.ofMinutes(5)))
          .isInstanceOf(PermissionDeniedException.class);
      assertThatThrownBy(() -> b.put("tenant-a/balance", "0"))
          .isInstanceOf(PermissionDeniedException.class);
      assertThatThrownBy(() -> b.grantLease("tenant-a/leader", Duration.ofSeconds(30)))
          .isInstanceOf(PermissionDeniedException.class);
      b.put("tenant-b/balance", "5"); // its own prefix works
    }
    try (IdemClient a = client("tenant-a")) {
      assertThat(a.get("tenant-a/balance").orElseThrow().valueAsString()).isEqualTo("100");
      assertThat(a.getKey("tenant-a", "order-17").orElseThrow().token())
          .as("A still owns its key")
          .isEqualTo(token);
      assertThat(a.completeKey("tenant-a", "order-17", token, new byte[] {1}))
          .isInstanceOf(io.idem.client.KeySettlement.Settled.class);
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
  }

  @Test
  void sessionNamesBelongToEachTenant() {
    try (RawSession a = raw("tenant-a");
        RawSession b = raw("tenant-b")) {
      RegisterReply ofA =
          a.register(
              RegisterRequest.newBuilder().setName("orders").setTtlMs(60_000).setNonce(1).build());
      RegisterReply ofB =
          b.register(
              RegisterRequest.newBuilder().setName("orders").setTtlMs(60_000).setNonce(2).build());
      assertThat(ofA.getCode()).isEqualTo(Code.OK);
      assertThat(ofB.getCode()).as("B's own \"orders\"").isEqualTo(Code.OK);
      assertThat(ofB.getClientId()).isNotEqualTo(ofA.getClientId());
    }
  }

  @Test
  void onlyTheAdminChangesTheCluster() {
    ConfigureRequest shrink =
        ConfigureRequest.newBuilder().setLimits(Limits.newBuilder().setMaxValueBytes(16)).build();
    try (RawSession a = raw("tenant-a")) {
      assertThat(a.configure(shrink).getCode()).isEqualTo(Code.PERMISSION_DENIED);
      assertThat(
              a.changeMembers(ChangeMembersRequest.newBuilder().addRemove("n3").build()).getCode())
          .isEqualTo(Code.PERMISSION_DENIED);
      AuthReply promote =
          a.auth(
              AuthRequest.newBuilder()
                  .setGrant(UserRoles.newBuilder().setPrincipal("CN=tenant-a").addRoles("admin"))
                  .build());
      assertThat(promote.getCode()).isEqualTo(Code.PERMISSION_DENIED);
      assertThat(promote.getRolesCount()).as("a refusal shows no roles").isZero();
    }
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getLimits().getMaxValueBytes()).isNotEqualTo(16);
      assertThat(cluster.node(i).status().getMembersCount()).isEqualTo(3);
    }
    try (RawSession admin = raw("admin")) {
      ConfigureRequest grow =
          ConfigureRequest.newBuilder()
              .setLimits(Limits.newBuilder().setMaxValueBytes(512 * 1024))
              .build();
      assertThat(admin.configure(grow).getCode()).isEqualTo(Code.OK);
      // No member's code applies the next format: the leader asks them all and refuses.
      int next = io.idem.server.IdemServer.MAX_LOG_FORMAT + 1;
      io.idem.proto.ConfigureReply tooNew =
          admin.configure(ConfigureRequest.newBuilder().setLogFormat(next).build());
      assertThat(tooNew.getCode()).isEqualTo(Code.INVALID_ARGUMENT);
      assertThat(tooNew.getMessage())
          .contains("applies log formats up to " + (next - 1) + ", not " + next);
    }
    try (RawSession a = raw("tenant-a")) {
      assertThat(
              a.configure(
                      ConfigureRequest.newBuilder()
                          .setLogFormat(io.idem.server.IdemServer.MAX_LOG_FORMAT)
                          .build())
                  .getCode())
          .isEqualTo(Code.PERMISSION_DENIED);
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(30));
    for (int i = 0; i < cluster.size(); i++) {
      assertThat(cluster.node(i).status().getLimits().getMaxValueBytes()).isEqualTo(512 * 1024);
      assertThat(cluster.node(i).status().getAuthEnabled()).isTrue();
      assertThat(cluster.node(i).status().getLogFormat())
          .isEqualTo(io.idem.server.IdemServer.MAX_LOG_FORMAT);
    }
  }
}
