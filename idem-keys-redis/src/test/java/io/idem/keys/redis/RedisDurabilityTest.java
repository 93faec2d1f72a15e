package io.idem.keys.redis;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Durability, measured: workers acquire and complete fresh keys against a redis-server with an AOF;
 * the server is killed with SIGKILL mid-load and restarted on the same directory; then every
 * completion Redis acknowledged is looked up, and the next token is compared with every token
 * handed out before. A third variant cuts the AOF in half after the kill, as a machine crash under
 * {@code appendfsync everysec} may lose its unsynced tail.
 *
 * <p>Each variant runs {@code -Didem.redis.durability.rounds=N} rounds (default 1) and prints one
 * line a round; docs/KEYS.md ("Redis store") records the figures.
 */
@Timeout(600)
class RedisDurabilityTest {
  static final int ROUNDS = Integer.getInteger("idem.redis.durability.rounds", 1);
  static final int WORKERS = 8;
  static final Fingerprint FP = Fingerprint.of("durability".getBytes(StandardCharsets.UTF_8));
  static final Duration LONG = Duration.ofMinutes(10);
  static final Duration DAY = Duration.ofDays(1);

  @TempDir Path dir;
  final long seed = Long.getLong("idem.redis.durability.seed", System.nanoTime());
  final Random random = new Random(seed);

  /** What one round saw. */
  record Round(
      String variant,
      long loadMs,
      long aofBufferAtKill,
      int delayedWrites,
      int acknowledged,
      int lost,
      int reacquired,
      int staleFenced,
      long lastAcknowledgedToken,
      long nextToken) {
    @Override
    public String toString() {
      return String.format(
          "%s: %d completions acknowledged in %d ms, %d lost after the restart (%d acquired anew,"
              + " their old owners fenced: %d; the rest still held by their owner); last token %d,"
              + " next %d (%s); AOF buffer not yet written at the kill: %d bytes; writes forced"
              + " after a 2 s fsync stall: %d",
          variant,
          acknowledged,
          loadMs,
          lost,
          reacquired,
          staleFenced,
          lastAcknowledgedToken,
          nextToken,
          nextToken > lastAcknowledgedToken ? "greater" : "NOT GREATER",
          aofBufferAtKill,
          delayedWrites);
    }
  }

  @Test
  void killedUnderAlwaysNoAcknowledgedCompletionIsLostAndTokensGrow() throws Exception {
    for (int i = 0; i < ROUNDS; i++) {
      Round r = round(RedisServer.Aof.ALWAYS, false, "always, kill -9 #" + i);
      assertThat(r.acknowledged()).isPositive();
      assertThat(r.lost()).isZero();
      assertThat(r.nextToken()).isGreaterThan(r.lastAcknowledgedToken());
    }
  }

  @Test
  void killedUnderEverysecTokensGrowAndLossesAreCounted() throws Exception {
    for (int i = 0; i < ROUNDS; i++) {
      Round r = round(RedisServer.Aof.EVERYSEC, false, "everysec, kill -9 #" + i);
      assertThat(r.acknowledged()).isPositive();
      assertThat(r.lost()).isBetween(0, r.acknowledged());
      assertThat(r.staleFenced()).isEqualTo(r.reacquired());
      assertThat(r.nextToken()).isGreaterThan(r.lastAcknowledgedToken());
    }
  }

  @Test
  void whenTheAofLosesItsTailCompletionsAreLostButTokensStillGrow() throws Exception {
    for (int i = 0; i < ROUNDS; i++) {
      Round r = round(RedisServer.Aof.EVERYSEC, true, "everysec, kill -9, AOF tail cut #" + i);
      assertThat(r.reacquired()).as("the cut really lost completions").isPositive();
      assertThat(r.staleFenced()).isEqualTo(r.reacquired());
      assertThat(r.nextToken()).isGreaterThan(r.lastAcknowledgedToken());
    }
  }

  private Round round(RedisServer.Aof aof, boolean cutTail, String variant) throws Exception {
    Path data = dir.resolve(variant.replaceAll("[^a-z0-9]+", "-"));
    Map<IdempotencyKey, Long> completed = new ConcurrentHashMap<>();
    AtomicLong lastToken = new AtomicLong();
    ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
    try (RedisServer redis = RedisServer.start(data, aof);
        RedisKeyStore store =
            RedisKeyStore.builder().uri(redis.uri()).timeout(Duration.ofSeconds(2)).build();
        Admin admin = new Admin(redis.uri())) {
      List<Future<?>> workers = new ArrayList<>();
      for (int w = 0; w < WORKERS; w++) {
        int worker = w;
        workers.add(pool.submit(() -> load(store, worker, completed, lastToken)));
      }
      long started = System.nanoTime();
      Thread.sleep(700 + random.nextInt(800));
      // On a loaded machine, wait for some load to lose (bounded): a round with nothing to lose
      // would show nothing.
      long enough = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (completed.size() < 100 && System.nanoTime() < enough) {
        Thread.sleep(10);
      }
      long aofBuffer = admin.aofBufferLength();
      redis.kill();
      long loadMs = (System.nanoTime() - started) / 1_000_000;
      for (Future<?> f : workers) {
        f.get(60, TimeUnit.SECONDS);
      }
      if (cutTail) {
        cutAofInHalf(data);
      }
      redis.restart();
      RedisKeyStoreTest.awaitAnswer(store, new IdempotencyKey("durability", "probe"));
      int lost = 0;
      int reacquired = 0;
      int staleFenced = 0;
      for (Map.Entry<IdempotencyKey, Long> e : completed.entrySet()) {
        Acquisition a = join(store.acquire(e.getKey(), FP, LONG, DAY));
        if (a.equals(new Acquisition.Completed(response(e.getKey())))) {
          continue;
        }
        lost++;
        if (a instanceof Acquisition.Acquired fresh) {
          // The key runs again under a new token; its owner from before the crash is fenced.
          reacquired++;
          Settlement s = join(store.complete(e.getKey(), e.getValue(), response(e.getKey())));
          if (s.equals(new Settlement.Fenced(fresh.token()))) {
            staleFenced++;
          }
        }
      }
      Acquisition next =
          join(store.acquire(new IdempotencyKey("durability", "next"), FP, LONG, DAY));
      Round r =
          new Round(
              variant,
              loadMs,
              aofBuffer,
              delayedWrites(redis.log()),
              completed.size(),
              lost,
              reacquired,
              staleFenced,
              lastToken.get(),
              ((Acquisition.Acquired) next).token());
      System.out.println("RedisDurabilityTest seed " + seed + " " + r);
      return r;
    } finally {
      pool.shutdownNow();
    }
  }

  /** Acquires and completes fresh keys until the store fails; records what was acknowledged. */
  private static void load(
      RedisKeyStore store, int worker, Map<IdempotencyKey, Long> completed, AtomicLong last) {
    for (int i = 0; ; i++) {
      IdempotencyKey k = new IdempotencyKey("durability", worker + "-" + i);
      try {
        Acquisition a = join(store.acquire(k, FP, LONG, DAY));
        long token = ((Acquisition.Acquired) a).token();
        last.accumulateAndGet(token, Math::max);
        Settlement s = join(store.complete(k, token, response(k)));
        assertThat(s).isEqualTo(new Settlement.Done(0));
        completed.put(k, token);
      } catch (CompletionException e) {
        assertThat(e).hasCauseInstanceOf(KeyStoreException.class);
        return; // the server is gone: this worker stops
      }
    }
  }

  /** A second connection, for INFO. */
  private static final class Admin implements AutoCloseable {
    final RedisClient client;
    final StatefulRedisConnection<String, String> connection;

    Admin(String uri) {
      client = RedisClient.create(uri);
      connection = client.connect();
    }

    /**
     * The AOF buffer's length (INFO persistence): writes already answered under everysec but not
     * yet written to the file, because the server postpones writing while a background fsync runs.
     */
    long aofBufferLength() {
      for (String line : connection.sync().info("persistence").split("\r?\n")) {
        if (line.startsWith("aof_buffer_length:")) {
          return Long.parseLong(line.substring("aof_buffer_length:".length()).trim());
        }
      }
      return -1;
    }

    @Override
    public void close() {
      connection.close();
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  /**
   * How often the server wrote its AOF buffer only after postponing it for a background fsync that
   * took too long (its log says so): under everysec, replies go out meanwhile, so a kill then loses
   * acknowledged writes.
   */
  private static int delayedWrites(String log) {
    int n = 0;
    for (int at = log.indexOf("fsync is taking too long"); at >= 0; ) {
      n++;
      at = log.indexOf("fsync is taking too long", at + 1);
    }
    return n;
  }

  private static byte[] response(IdempotencyKey k) {
    return ("paid " + k.key()).getBytes(StandardCharsets.UTF_8);
  }

  /** Truncates the newest incremental AOF file to half its size (Redis 7's appendonlydir). */
  private static void cutAofInHalf(Path data) throws IOException {
    Path aof;
    try (Stream<Path> files = Files.list(data.resolve("appendonlydir"))) {
      aof =
          files
              .filter(p -> p.getFileName().toString().endsWith(".incr.aof"))
              .max(Comparator.comparing(p -> p.getFileName().toString()))
              .orElseThrow(() -> new IllegalStateException("no incremental AOF in " + data));
    }
    try (RandomAccessFile f = new RandomAccessFile(aof.toFile(), "rw")) {
      f.setLength(f.length() / 2);
    }
  }

  private static <T> T join(CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }
}
