package io.idem.verify;

import io.idem.client.ClientTls;
import io.idem.proto.AuthRequest;
import io.idem.proto.Code;
import io.idem.proto.ConfigureRequest;
import io.idem.proto.Permission;
import io.idem.proto.Role;
import io.idem.proto.UserRoles;
import io.idem.testkit.RawSession;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

/**
 * Administration of a {@link ProcessCluster}: the replicated configuration and, on a secured
 * cluster, roles and grants, each sent to the leader (asked directly, not through its proxy) as
 * {@link ProcessCluster#ADMIN}, and sent again to the next leader until one takes it.
 */
public final class ClusterAdmin {
  private final ProcessCluster cluster;

  ClusterAdmin(ProcessCluster cluster) {
    this.cluster = cluster;
  }

  /**
   * On a secured cluster, gives the clients' principal ({@code CN=client}) the role {@link
   * ProcessCluster#CLIENT_ROLE}, as the admin, through the leader; nothing on a plaintext one.
   *
   * @throws IllegalStateException if no leader took it within {@code timeout}
   */
  public void grantClients(Duration timeout) throws InterruptedException {
    if (cluster.clientTls() == null) {
      return;
    }
    Role role =
        Role.newBuilder()
            .setName(ProcessCluster.CLIENT_ROLE)
            .addPermissions(
                Permission.newBuilder().setKind(Permission.Kind.KV_READ_WRITE).setPrefix(""))
            .addPermissions(
                Permission.newBuilder().setKind(Permission.Kind.KEY_SCOPE).setPrefix(""))
            .addPermissions(Permission.newBuilder().setKind(Permission.Kind.LEASE).setPrefix(""))
            .build();
    grant("CN=client", role, timeout);
  }

  /**
   * On a secured cluster, puts {@code role} and grants it to {@code principal}, as the admin,
   * through the leader.
   *
   * @throws IllegalStateException if the cluster is plaintext, or no leader took a change within
   *     {@code timeout}
   */
  void grant(String principal, Role role, Duration timeout) throws InterruptedException {
    if (cluster.clientTls() == null) {
      throw new IllegalStateException("a plaintext cluster has no roles: " + role.getName());
    }
    List<AuthRequest> changes =
        List.of(
            AuthRequest.newBuilder().setPutRole(role).build(),
            AuthRequest.newBuilder()
                .setGrant(UserRoles.newBuilder().setPrincipal(principal).addRoles(role.getName()))
                .build());
    for (AuthRequest change : changes) {
      asAdmin(change.toString(), admin -> admin.auth(change).getCode(), timeout);
    }
  }

  /**
   * Changes the replicated configuration (the Configure RPC) through the leader, as the admin on a
   * secured cluster.
   *
   * @throws IllegalStateException if no leader took it within {@code timeout}
   */
  void configure(ConfigureRequest change, Duration timeout) throws InterruptedException {
    asAdmin(change.toString(), admin -> admin.configure(change).getCode(), timeout);
  }

  /**
   * Sends {@code change} to the leader until one answers OK, or {@code timeout} passed; in a
   * cluster of several groups to the leader of each group in turn, the metadata group first (each
   * group holds the configuration and access control it decides by, as {@code idem auth} does).
   */
  private void asAdmin(String what, Function<RawSession, Code> change, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    int groups = cluster.groups();
    if (groups == 1) {
      asAdmin(-1, what, change, deadline, timeout);
      return;
    }
    for (int g = 0; g <= groups; g++) {
      asAdmin(g, what + " in group " + g, change, deadline, timeout);
    }
  }

  private void asAdmin(
      int group, String what, Function<RawSession, Code> change, long deadline, Duration timeout)
      throws InterruptedException {
    while (true) {
      Optional<Integer> leader = cluster.leader(group);
      if (leader.isPresent()) {
        String address = cluster.directAddresses().get(leader.get());
        ClientTls admin = cluster.tls("admin");
        try (RawSession session =
            admin == null
                ? new RawSession(address, group)
                : new RawSession(
                    address,
                    group,
                    admin.trustedCertificates(),
                    admin.certificateChain(),
                    admin.privateKey())) {
          if (change.apply(session) == Code.OK) {
            return;
          }
        } catch (RuntimeException e) {
          // the leader went away: ask the next one
        }
      }
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("no leader took " + what + " within " + timeout);
      }
      Thread.sleep(200);
    }
  }
}
