package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.WriteResult;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A write that waits for a majority longer than Ratis's retry cache keeps a reply (1 s, {@code
 * RaftNode}) is still answered, and applied once: the cache entry of its call expires while it is
 * pending, and Ratis makes a new one when the entry is applied.
 */
@Timeout(180)
class LongPendingWriteTest {
  @TempDir Path dir;

  @Test
  void aWritePendingLongerThanTheRetryCacheIsAnsweredAndAppliedOnce() throws Exception {
    // Long election timeouts: the leader must not step down while its followers are away.
    try (LocalCluster cluster =
        LocalCluster.start(3, dir, b -> b.electionTimeoutMs(8_000, 12_000))) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(90));
      try (IdemClient client = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        client.put("warm", "up");
        List<Integer> followers = new ArrayList<>();
        for (int i = 0; i < cluster.size(); i++) {
          if (i != leader) {
            followers.add(i);
            cluster.kill(i);
          }
        }
        CompletableFuture<WriteResult> pending =
            client.putAsync("k", "v".getBytes(StandardCharsets.UTF_8), null);
        Thread.sleep(2_500);
        assertThat(pending).as("no majority: the write waits").isNotDone();
        followers.forEach(cluster::restart);

        WriteResult written = pending.get(60, TimeUnit.SECONDS);
        assertThat(written.version()).isEqualTo(1);
        KeyValue kv = client.get("k").orElseThrow();
        assertThat(kv.version()).as("applied once").isEqualTo(1);
        assertThat(kv.valueAsString()).isEqualTo("v");
      }
    }
  }
}
