package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.DuplicateLeaseException;
import io.idem.client.IdemClient;
import io.idem.testkit.Eventually;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The seeds' lease story: a client grants a lease, the response is lost, the client retries. With
 * the Idempotent Receiver, the retry gets the original success, not DUPLICATE_LEASE; a different
 * client does get DUPLICATE_LEASE.
 */
@Timeout(120)
class LeaseResponseLostTest {
  @TempDir Path dir;

  @Test
  void retryAfterLostResponseGetsTheOriginalSuccess() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir)) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      try (FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
          IdemClient owner =
              IdemClient.builder()
                  .servers(List.of(proxy.address()))
                  .stallTimeout(Duration.ofSeconds(30))
                  .build();
          IdemClient other = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        owner.put("warmup", "x"); // the session exists before the fault

        // The answers on the open connection vanish; the socket stays open, so the client learns
        // nothing until the reset below, and a new connection works normally.
        proxy.silenceResponsesOnOpenConnections();
        CompletableFuture<Long> grant =
            owner.grantLeaseAsync("leader-lock", Duration.ofSeconds(30));
        // The grant is applied on the leader, but its answer can only go to the silent connection.
        Eventually.until(
            "the lease applied",
            Duration.ofSeconds(20),
            () -> cluster.node(leader).status().getLeases() == 1);
        assertThat(grant).isNotDone();

        proxy.resetConnections(); // the client notices, reconnects, resends the same number
        long expiry = grant.get(30, TimeUnit.SECONDS);
        assertThat(expiry).isPositive();
        assertThat(owner.duplicatesSeen()).isEqualTo(1);
        assertThat(owner.retries()).isPositive();

        assertThatThrownBy(() -> other.grantLease("leader-lock", Duration.ofSeconds(30)))
            .isInstanceOf(DuplicateLeaseException.class);
        // A key under the lease goes with it.
        owner.put("leader", "me".getBytes(java.nio.charset.StandardCharsets.UTF_8), "leader-lock");
        assertThat(other.get("leader").orElseThrow().lease()).isEqualTo("leader-lock");
        // Only the holder's session renews or revokes it.
        assertThatThrownBy(() -> other.keepAliveLease("leader-lock"))
            .isInstanceOf(io.idem.client.LeaseNotFoundException.class)
            .hasMessageContaining("held by another session");
        assertThatThrownBy(() -> other.revokeLease("leader-lock"))
            .isInstanceOf(io.idem.client.LeaseNotFoundException.class);
        assertThat(owner.revokeLease("leader-lock")).isGreaterThanOrEqualTo(expiry - 30_000);
        assertThat(other.get("leader")).isEmpty();
        assertThatThrownBy(() -> other.revokeLease("leader-lock"))
            .isInstanceOf(io.idem.client.LeaseNotFoundException.class);
        assertThat(cluster.node(leader).status().getDuplicatesSuppressed()).isEqualTo(1);
      }
      // Both clients were anonymous and idle when closed: their sessions are closed, not left to
      // expire.
      Eventually.until(
          "sessions closed",
          Duration.ofSeconds(10),
          () ->
              cluster.node(cluster.waitForLeader(Duration.ofSeconds(10))).status().getLiveSessions()
                  == 0);
      cluster.awaitEqualDigests(Duration.ofSeconds(20));
    }
  }
}
