package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.testkit.stores.RedisServer;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The check at {@code build()}: a redis-server with no AOF and no replica is refused under {@code
 * requireDurability(true)} and only named (a WARNING) without it; one with an AOF passes; and
 * {@code waitForReplicas} on a server without replicas never says yes.
 */
@Timeout(120)
class RedisDurabilityCheckTest {
  @TempDir Path dir;

  @Test
  void aServerWithoutAofOrReplicaIsRefusedOnlyWhenDurabilityIsRequired() {
    try (RedisServer redis = RedisServer.start(dir.resolve("off"), RedisServer.Aof.OFF)) {
      assertThatThrownBy(
              () -> RedisKeyStore.builder().uri(redis.uri()).requireDurability(true).build())
          .isInstanceOf(KeyStoreException.class)
          .hasMessageContaining("appendonly no")
          .hasMessageContaining("connected replicas 0")
          .hasMessageContaining("requireDurability");
      try (RedisKeyStore store = RedisKeyStore.builder().uri(redis.uri()).build()) {
        assertThat(store.show(new IdempotencyKey("s", "k")).toCompletableFuture().join()).isEmpty();
      }
    }
  }

  @Test
  void aServerWithAnAofPassesTheCheck() {
    try (RedisServer redis = RedisServer.start(dir.resolve("aof"), RedisServer.Aof.EVERYSEC);
        RedisKeyStore store =
            RedisKeyStore.builder().uri(redis.uri()).requireDurability(true).build()) {
      assertThat(store.show(new IdempotencyKey("s", "k")).toCompletableFuture().join()).isEmpty();
    }
  }

  @Test
  void waitForAReplicaThatIsNotThereIsNeverAYes() {
    try (RedisServer redis = RedisServer.start(dir.resolve("wait"), RedisServer.Aof.ALWAYS);
        RedisKeyStore store =
            RedisKeyStore.builder()
                .uri(redis.uri())
                .waitForReplicas(1, Duration.ofMillis(50))
                .build()) {
      assertThatThrownBy(
              () -> store.show(new IdempotencyKey("s", "k")).toCompletableFuture().join())
          .hasCauseInstanceOf(KeyStoreException.class)
          .hasMessageContaining("0 replica(s) acknowledged");
    }
    assertThatThrownBy(
            () ->
                RedisKeyStore.builder()
                    .uri("redis://127.0.0.1:1")
                    .timeout(Duration.ofSeconds(1))
                    .waitForReplicas(1, Duration.ofSeconds(1))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("shorter than the timeout");
  }
}
