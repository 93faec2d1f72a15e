package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.CasResult;
import io.idem.client.DeleteResult;
import io.idem.client.DuplicateLeaseException;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.InvalidArgumentException;
import io.idem.client.LeaseKeepAlive;
import io.idem.client.LeaseNotFoundException;
import io.idem.client.NotSentException;
import io.idem.client.WriteResult;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** What the client's API returns and how it fails, against a real one-node cluster. */
@Timeout(120)
class ClientApiTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static String servers;

  /** A loopback address where nothing listens. */
  static final String NOBODY = "127.0.0.1:" + LocalCluster.freePort();

  @BeforeAll
  static void start() {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
    servers = String.join(",", cluster.clientAddresses());
  }

  @AfterAll
  static void stop() {
    cluster.close();
  }

  static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static Throwable failure(CompletableFuture<?> f) {
    try {
      f.join();
      throw new AssertionError("did not fail");
    } catch (CompletionException e) {
      return e.getCause();
    }
  }

  @Test
  void compareAndSetReturnsTheNewVersionOrTheOneToExpectNext() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      CasResult created = c.compareAndSet("cas", 0, utf8("a"));
      assertThat(created.written()).isTrue();
      assertThat(created.version()).isEqualTo(1);
      CasResult second = c.compareAndSet("cas", 1, utf8("b"));
      assertThat(second.written()).isTrue();
      assertThat(second.version()).isEqualTo(2);
      assertThat(second.revision()).isGreaterThan(created.revision());
      CasResult stale = c.compareAndSet("cas", 1, utf8("c"));
      assertThat(stale.written()).isFalse();
      assertThat(stale.version()).isEqualTo(2);
      assertThat(c.get("cas").orElseThrow().valueAsString()).isEqualTo("b");
    }
  }

  @Test
  void deleteSaysWhetherTheKeyExistedAndAtWhichRevision() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      WriteResult put = c.put("gone", "x");
      DeleteResult d = c.delete("gone");
      assertThat(d.existed()).isTrue();
      assertThat(d.revision()).isGreaterThan(put.revision());
      assertThat(c.delete("gone").existed()).isFalse();
      assertThat(c.get("gone")).isEmpty();
    }
  }

  @Test
  void aCallOverTheClustersLimitsIsRefusedBeforeItIsNumbered() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      c.put("warm", "up"); // registered: the client knows the limits now
      InvalidArgumentException e =
          (InvalidArgumentException) failure(c.putAsync("big", new byte[1024 * 1024 + 1], null));
      assertThat(e).hasMessageContaining("the limit is 1048576");
      assertThat(e.requestNumber()).isZero();
      assertThat(c.increment("after-big", 1)).isEqualTo(1);
      assertThatThrownBy(() -> c.put("", "x")).isInstanceOf(InvalidArgumentException.class);
    }
  }

  @Test
  void aCallWithNoServerToTakeItFailsAsNotSentAtItsOwnDeadline() {
    try (IdemClient c =
        IdemClient.builder().servers(NOBODY).requestTimeout(Duration.ofSeconds(60)).build()) {
      long start = System.nanoTime();
      CompletableFuture<Long> f = c.withTimeout(Duration.ofMillis(300)).incrementAsync("n", 1);
      NotSentException e = (NotSentException) failure(f);
      long tookMs = (System.nanoTime() - start) / 1_000_000;
      assertThat(e.reason()).isEqualTo(NotSentException.Reason.DEADLINE);
      assertThat(tookMs).as("the view's timeout, not the client's 60 s").isLessThan(30_000);
    }
  }

  @Test
  void readsWithoutAServerBlockNoThreadAndFailAsUnavailable() {
    try (IdemClient c =
        IdemClient.builder().servers(NOBODY).requestTimeout(Duration.ofSeconds(2)).build()) {
      int before = Thread.activeCount();
      List<CompletableFuture<?>> reads = new ArrayList<>();
      for (int i = 0; i < 300; i++) {
        reads.add(c.getAsync("k" + i));
      }
      assertThat(Thread.activeCount() - before)
          .as("threads started for 300 pending reads")
          .isLessThan(30);
      for (CompletableFuture<?> r : reads) {
        assertThat(failure(r))
            .isInstanceOfSatisfying(
                NotSentException.class,
                e -> assertThat(e.reason()).isEqualTo(NotSentException.Reason.UNAVAILABLE));
      }
    }
  }

  @Test
  void aGracefulCloseLetsTheCallsInFlightFinishAndRefusesNewOnes() {
    IdemClient c = IdemClient.builder().servers(servers).window(16).build();
    List<CompletableFuture<Long>> calls = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      calls.add(c.incrementAsync("graceful", 1));
    }
    c.close(Duration.ofSeconds(30));
    for (CompletableFuture<Long> f : calls) {
      assertThat(f).isCompleted();
    }
    assertThat(calls.get(199).join()).isEqualTo(200);
    assertThat(failure(c.incrementAsync("graceful", 1)))
        .isInstanceOfSatisfying(
            NotSentException.class,
            e -> assertThat(e.reason()).isEqualTo(NotSentException.Reason.CLIENT_CLOSED));
  }

  @Test
  void aLeaseKeptAliveOutlivesItsTtlAndExpiresOnceTheKeepAliveStops() {
    try (IdemClient holder = IdemClient.builder().servers(servers).build();
        IdemClient other = IdemClient.builder().servers(servers).build()) {
      holder.grantLease("kept", Duration.ofMillis(1_000));
      AtomicInteger renewals = new AtomicInteger();
      LeaseKeepAlive k =
          holder.keepLeaseAlive(
              "kept",
              Duration.ofMillis(250),
              new LeaseKeepAlive.Listener() {
                @Override
                public void onRenewed(long expiryLogMs) {
                  renewals.incrementAndGet();
                }
              });
      // Twelve renewals take three TTLs: without them the lease would have expired.
      Eventually.until("12 renewals", Duration.ofSeconds(30), () -> renewals.get() >= 12);
      assertThatThrownBy(() -> other.grantLease("kept", Duration.ofSeconds(1)))
          .isInstanceOf(DuplicateLeaseException.class);
      assertThat(k.lost()).isNotDone();
      k.close();
      Eventually.until(
          "the lease expired once no longer renewed",
          Duration.ofSeconds(30),
          () -> {
            try {
              other.grantLease("kept", Duration.ofSeconds(5));
              return true;
            } catch (DuplicateLeaseException held) {
              return false;
            }
          });
    }
  }

  @Test
  void aLeaseKeepAliveReportsTheLeaseLost() {
    try (IdemClient holder = IdemClient.builder().servers(servers).build()) {
      holder.grantLease("revoked", Duration.ofSeconds(10));
      List<IdemException> lost = new CopyOnWriteArrayList<>();
      LeaseKeepAlive k =
          holder.keepLeaseAlive(
              "revoked",
              Duration.ofMillis(100),
              new LeaseKeepAlive.Listener() {
                @Override
                public void onLost(IdemException cause) {
                  lost.add(cause);
                }
              });
      holder.revokeLease("revoked");
      assertThat(k.lost().join()).isInstanceOf(LeaseNotFoundException.class);
      assertThat(lost).hasSize(1);
    }
  }
}
