package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.idem.client.FencedWriteException;
import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeyRecord;
import io.idem.client.KeySettlement;
import io.idem.client.Write;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Idempotency keys on three real server processes behind fault proxies: a lost acquire answer, a
 * paused owner after a takeover, an owner's fenced append held up past its deadline by a failover,
 * and a completed key across a leader failover and a restart of every node.
 */
@Tag("slow")
@Timeout(240)
class KeysScenarioTest {
  @TempDir static Path dir;
  static ProcessCluster cluster;

  private static final byte[] FP = "100 EUR".getBytes(StandardCharsets.UTF_8);

  @BeforeAll
  static void start() throws InterruptedException {
    cluster = new ProcessCluster(dir.resolve("cluster"), 3);
    cluster.startAll();
    awaitLeader();
  }

  @AfterAll
  static void stop() {
    cluster.close();
  }

  private static int awaitLeader() throws InterruptedException {
    for (int i = 0; i < 300; i++) {
      Optional<Integer> l = cluster.leader();
      if (l.isPresent()) {
        return l.get();
      }
      Thread.sleep(200);
    }
    throw new AssertionError("no leader within 60 s");
  }

  /** A client through the proxies (the faults reach it). */
  private static IdemClient proxied() {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .requestTimeout(Duration.ofSeconds(60))
        .build();
  }

  /** A client that talks to the nodes directly (the faults spare it). */
  private static IdemClient direct() {
    return IdemClient.builder()
        .servers(cluster.directAddresses())
        .requestTimeout(Duration.ofSeconds(60))
        .build();
  }

  @Test
  void anAcquireWhoseAnswerIsLostGetsTheSameTokenOnItsRetryAndLeavesNoPhantomOwner()
      throws Exception {
    try (IdemClient owner = proxied();
        IdemClient observer = direct()) {
      owner.put("warm-up", new byte[] {1}); // registered and connected before the fault
      for (int i = 0; i < cluster.size(); i++) {
        cluster.proxy(i).blackholeResponses();
      }
      CompletableFuture<KeyAcquisition> lost =
          owner.acquireKeyAsync(
              "acme", "order-lost", FP, Duration.ofMinutes(5), Duration.ofHours(1));
      // The acquire reaches the leader and is applied; its answer vanishes.
      Optional<KeyRecord> applied = Optional.empty();
      for (int i = 0; i < 200 && applied.isEmpty(); i++) {
        Thread.sleep(100);
        applied = observer.getKey("acme", "order-lost");
      }
      assertThat(applied).as("the acquire was applied while its answer was lost").isPresent();
      assertThat(lost).isNotDone();
      // Answers flow again; the connections break, and the client resends the same request.
      for (int i = 0; i < cluster.size(); i++) {
        cluster.proxy(i).resetConnections();
        cluster.proxy(i).passResponses();
      }
      KeyAcquisition answer = lost.get(60, TimeUnit.SECONDS);
      assertThat(answer).isInstanceOf(KeyAcquisition.Acquired.class);
      KeyAcquisition.Acquired acquired = (KeyAcquisition.Acquired) answer;
      assertThat(acquired.token()).isEqualTo(applied.get().token());
      assertThat(acquired.duplicate()).as("the saved answer of the first copy").isTrue();
      // No phantom owner: another caller finds the key held under that very token.
      KeyAcquisition other =
          observer.acquireKey("acme", "order-lost", FP, Duration.ofMinutes(5), Duration.ofHours(1));
      assertThat(other).isInstanceOf(KeyAcquisition.InProgress.class);
      assertThat(((KeyAcquisition.InProgress) other).deadlineMs()).isEqualTo(acquired.deadlineMs());
      assertThat(observer.getKey("acme", "order-lost").orElseThrow().token())
          .isEqualTo(acquired.token());
      // The owner settles it: it does own it.
      assertThat(owner.completeKey("acme", "order-lost", acquired.token(), FP))
          .isInstanceOf(KeySettlement.Settled.class);
    }
  }

  @Test
  void aPausedOwnersFencedWriteAndCompletionAreRefusedAfterATakeover() throws Exception {
    try (IdemClient paused = proxied();
        IdemClient other = proxied()) {
      KeyAcquisition.Acquired first =
          (KeyAcquisition.Acquired)
              paused.acquireKey(
                  "acme", "order-paused", FP, Duration.ofMillis(300), Duration.ofHours(1));
      // The first owner does nothing past its deadline; a duplicate takes the key over.
      KeyAcquisition taken = null;
      for (int i = 0; i < 100; i++) {
        taken =
            other.acquireKey(
                "acme", "order-paused", FP, Duration.ofMinutes(5), Duration.ofHours(1));
        if (taken instanceof KeyAcquisition.Acquired) {
          break;
        }
        Thread.sleep(100);
      }
      assertThat(taken).isInstanceOf(KeyAcquisition.Acquired.class);
      KeyAcquisition.Acquired second = (KeyAcquisition.Acquired) taken;
      assertThat(second.takeover()).isTrue();
      assertThat(second.token()).isGreaterThan(first.token());

      // The paused owner wakes up and tries to finish: refused inside the store.
      IdemClient stale = paused.fenced(first.fence("acme", "order-paused"));
      assertThatThrownBy(() -> stale.increment("balance/acme", -100))
          .isInstanceOfSatisfying(
              FencedWriteException.class,
              e -> assertThat(e.currentToken()).isEqualTo(second.token()));
      KeySettlement late =
          paused.completeKey(
              "acme",
              "order-paused",
              first.token(),
              FP,
              Write.append("ledger/acme", "late".getBytes(StandardCharsets.UTF_8)));
      assertThat(late)
          .isInstanceOfSatisfying(
              KeySettlement.Fenced.class,
              f -> assertThat(f.currentToken()).isEqualTo(second.token()));
      assertThat(other.get("balance/acme")).isEmpty();
      assertThat(other.get("ledger/acme")).isEmpty();
      assertThat(other.getKey("acme", "order-paused").orElseThrow().token())
          .isEqualTo(second.token());
    }
  }

  /**
   * Issue 36: an owner's fenced append held up by a failover longer than its in-progress timeout
   * reaches the new leader after its deadline, before anyone took the key over. From log format 8
   * it is refused there; format 7 applied it, and the duplicate that then took the key over paid
   * again. Here the duplicate pays once.
   */
  @Test
  void aFencedAppendResentAfterItsDeadlineByAFailoverIsRefusedThoughNobodyTookOver()
      throws Exception {
    try (IdemClient owner = proxied();
        IdemClient duplicate = direct()) {
      int leader = awaitLeader();
      KeyAcquisition.Acquired first =
          (KeyAcquisition.Acquired)
              owner.acquireKey(
                  "acme", "order-failover", FP, Duration.ofMillis(200), Duration.ofHours(1));
      cluster.pause(leader);
      try {
        // The frozen leader holds it; the client resends it to the next leader, elected after at
        // least the 300 ms election timeout: past the owner's deadline, in log time.
        CompletableFuture<Long> append =
            owner
                .fenced(first.fence("acme", "order-failover"))
                .appendAsync("ledger/failover", utf8("order-failover:" + first.token()));
        Throwable refused = catchThrowable(() -> append.get(60, TimeUnit.SECONDS));
        assertThat(refused)
            .as("the owner's append after its deadline")
            .isInstanceOf(ExecutionException.class)
            .cause()
            .isInstanceOfSatisfying(
                FencedWriteException.class,
                e -> {
                  assertThat(e.currentToken()).as("nobody took over").isEqualTo(first.token());
                  assertThat(e.getMessage()).contains("deadline, which passed");
                });
      } finally {
        cluster.resume(leader);
      }
      assertThat(duplicate.get("ledger/failover")).isEmpty();

      KeyAcquisition taken =
          duplicate.acquireKey(
              "acme", "order-failover", FP, Duration.ofMinutes(5), Duration.ofHours(1));
      assertThat(taken)
          .isInstanceOfSatisfying(
              KeyAcquisition.Acquired.class, a -> assertThat(a.takeover()).isTrue());
      KeyAcquisition.Acquired second = (KeyAcquisition.Acquired) taken;
      duplicate
          .fenced(second.fence("acme", "order-failover"))
          .append("ledger/failover", utf8("order-failover:" + second.token()));
      assertThat(duplicate.completeKey("acme", "order-failover", second.token(), FP))
          .isInstanceOf(KeySettlement.Settled.class);
      assertThat(owner.completeKey("acme", "order-failover", first.token(), FP))
          .isInstanceOf(KeySettlement.Fenced.class);
      assertThat(duplicate.get("ledger/failover").orElseThrow().elements())
          .as("paid once")
          .hasSize(1);
    }
    awaitLeader();
  }

  private static byte[] utf8(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void aCompletedKeyReplaysItsResponseAfterALeaderFailoverAndARestartOfEveryNode()
      throws Exception {
    byte[] paid = "paid 100 EUR".getBytes(StandardCharsets.UTF_8);
    long token;
    try (IdemClient c = proxied()) {
      KeyAcquisition.Acquired owned =
          (KeyAcquisition.Acquired)
              c.acquireKey("acme", "order-done", FP, Duration.ofMinutes(5), Duration.ofHours(1));
      token = owned.token();
      assertThat(
              c.completeKey(
                  "acme", "order-done", token, paid, Write.increment("balance/done", -100)))
          .isInstanceOf(KeySettlement.Settled.class);
    }
    int leader = awaitLeader();
    cluster.kill(leader);
    try (IdemClient c = proxied()) {
      assertThat(c.acquireKey("acme", "order-done", FP, Duration.ofMinutes(5), Duration.ofHours(1)))
          .as("after the leader's kill -9")
          .isInstanceOfSatisfying(
              KeyAcquisition.Completed.class, d -> assertThat(d.response()).isEqualTo(paid));
      // Enough entries that the nodes take snapshots: the restart reads one back.
      for (int i = 0; i < ProcessCluster.SNAPSHOT_EVERY + 500; i++) {
        c.put("filler/" + (i % 50), new byte[] {(byte) i}); // one entry each: no batching
      }
    }
    try (Stream<Path> files = Files.walk(dir.resolve("cluster"))) {
      assertThat(files.filter(f -> f.getFileName().toString().startsWith("snapshot.")))
          .as("snapshots the restart reads back")
          .isNotEmpty();
    }
    cluster.start(leader);
    for (int i = 0; i < cluster.size(); i++) {
      cluster.kill(i);
    }
    cluster.startAll();
    awaitLeader();
    try (IdemClient c = proxied()) {
      assertThat(c.acquireKey("acme", "order-done", FP, Duration.ofMinutes(5), Duration.ofHours(1)))
          .as("after a restart of every node")
          .isInstanceOfSatisfying(
              KeyAcquisition.Completed.class, d -> assertThat(d.response()).isEqualTo(paid));
      KeyRecord r = c.getKey("acme", "order-done").orElseThrow();
      assertThat(r.completed()).isTrue();
      assertThat(r.token()).isEqualTo(token);
      assertThat(c.get("balance/done").orElseThrow().valueAsString()).isEqualTo("-100");
    }
    assertThat(cluster.leader()).isPresent();
  }
}
