package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.proto.Code;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.proto.StatusReply;
import io.idem.testkit.Eventually;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Restarts from snapshot and log, and a wiped node that rejoins through snapshot install with its
 * sessions intact: a duplicate sent to it once it leads still gets the saved response.
 */
@Timeout(240)
class SnapshotRecoveryTest {
  @TempDir Path dir;

  private static Operation incr(String key) {
    return Operation.newBuilder()
        .setIncrement(Increment.newBuilder().setKey(key).setDelta(1))
        .build();
  }

  private static void load(LocalCluster cluster, int n) throws Exception {
    // A small window keeps entries small (the leader folds whatever is queued into one entry), so
    // that n increments make enough entries to cross several snapshots and log segments.
    try (IdemClient c = IdemClient.builder().servers(cluster.clientAddresses()).window(4).build()) {
      var calls = new java.util.ArrayList<java.util.concurrent.CompletableFuture<Long>>();
      for (int i = 0; i < n; i++) {
        calls.add(c.incrementAsync("load", 1));
      }
      for (var f : calls) {
        f.get();
      }
    }
  }

  private static long snapshotFiles(Path nodeDir) {
    try (Stream<Path> files = Files.walk(nodeDir)) {
      return files.filter(p -> p.getFileName().toString().matches("snapshot\\.\\d+_\\d+")).count();
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  @Test
  void followerRestartsAndWipedNodeRejoinsWithSessionsIntact() throws Exception {
    try (LocalCluster cluster =
        LocalCluster.start(
            3,
            dir,
            b -> b.snapshotEveryEntries(20).snapshotsRetained(2).logSegmentBytes(16 * 1024))) {
      Sessions.Registered reg =
          Sessions.register(
              cluster, RegisterRequest.newBuilder().setTtlMs(600_000).setNonce(42).build());
      int leader = reg.leader();
      RegisterReply grant = reg.grant();
      try (RawSession raw = new RawSession(cluster.clientAddress(leader))) {
        raw.open(grant);
        raw.send(1, 1, incr("mine"));
        ServerFrame original = raw.answerTo(1);
        assertThat(original.getResult().getNumber()).isEqualTo(1);

        // A follower goes down, misses entries and snapshots, and comes back from its data.
        int follower = (leader + 1) % 3;
        cluster.kill(follower);
        load(cluster, 500);
        cluster.restart(follower);
        cluster.awaitEqualDigests(Duration.ofSeconds(60));

        // The other follower is wiped; the leader's log is purged behind its snapshots, so it
        // can only catch up through snapshot install.
        int wiped = (leader + 2) % 3;
        load(cluster, 500);
        // Retention is bounded (2 files). Ratis renames and deletes files as we list, so retry.
        Path leaderDir = dir.resolve("n" + (leader + 1));
        Eventually.until(
            "1 or 2 snapshot files",
            Duration.ofSeconds(10),
            () -> {
              long n = snapshotFiles(leaderDir);
              return n >= 1 && n <= 2;
            });
        assertThat(cluster.node(leader).logStartIndex()).isGreaterThan(1);
        cluster.wipeAndRestart(wiped);
        cluster.awaitEqualDigests(Duration.ofSeconds(60));

        // Make the wiped node the leader and send it the duplicate. Leadership may still move
        // right after a transfer; then the stream is refused with NOT_LEADER and we try again.
        ServerFrame dup = null;
        for (int attempt = 0; attempt < 5; attempt++) {
          cluster.transferLeadershipTo(wiped);
          try (RawSession again = new RawSession(cluster.clientAddress(wiped))) {
            again.open(grant);
            again.send(1, 1, incr("mine"));
            dup = again.answerTo(1);
          }
          if (dup.getResult().getCode() != Code.NOT_LEADER) {
            break;
          }
        }
        assertThat(dup.getSeq()).isEqualTo(1);
        assertThat(dup.getDuplicate()).isTrue();
        assertThat(dup.getResult()).isEqualTo(original.getResult());
      }
      cluster.awaitEqualDigests(Duration.ofSeconds(60));
    }
  }

  /**
   * Every replica snapshots at the same log indexes (multiples of the interval), and the Status
   * reply carries the digest taken there: an operator compares them across nodes.
   */
  @Test
  void replicasSnapshotAtTheSameIndexesWithEqualDigests() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(3, dir, b -> b.snapshotEveryEntries(20))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      load(cluster, 300);
      AtomicReference<List<StatusReply>> seen = new AtomicReference<>();
      Eventually.until(
          "three nodes report a snapshot digest at the same index",
          Duration.ofSeconds(60),
          () -> {
            var replies =
                List.of(
                    cluster.node(0).status(), cluster.node(1).status(), cluster.node(2).status());
            seen.set(replies);
            long index = replies.get(0).getDigestIndex();
            return index > 0 && replies.stream().allMatch(r -> r.getDigestIndex() == index);
          });
      var replies = seen.get();
      assertThat(replies.get(0).getDigestIndex() % 20).isZero();
      assertThat(replies.get(0).getDigest()).hasSize(64);
      assertThat(replies)
          .extracting(StatusReply::getDigest)
          .containsOnly(replies.get(0).getDigest());
    }
  }
}
