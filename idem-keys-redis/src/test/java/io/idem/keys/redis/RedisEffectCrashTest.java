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
import io.lettuce.core.api.sync.RedisCommands;
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
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A completion and its {@link RedisEffect} survive a crash together or not at all. Workers acquire
 * fresh keys and complete each with an effect (the four kinds in turn, each leaving evidence of its
 * key) on a redis-server with {@code appendfsync always}; the server is killed with SIGKILL under
 * that load and restarted on its directory. Then, for every key a worker acquired: completed if and
 * only if its effect is there, and the effect at most once; and every acknowledged completion is
 * there. Then the AOF of the killed server is cut inside completions' {@code MULTI}/{@code EXEC}
 * blocks, one cut per copy, standing in for a crash in the middle of writing one: the server loads
 * each copy without the cut completion and without its effect, and with every completion before it.
 */
@Tag("slow")
@Tag("campaign")
@Timeout(300)
class RedisEffectCrashTest {
  static final int WORKERS = 8;
  static final int CUTS = 12;
  static final Fingerprint FP = Fingerprint.of("crash".getBytes(StandardCharsets.UTF_8));
  static final Duration LONG = Duration.ofMinutes(10);
  static final Duration DAY = Duration.ofDays(1);
  static final String NS = "{crash}";

  @TempDir Path dir;
  final long seed = Long.getLong("idem.redis.effect.seed", System.nanoTime());
  final Random random = new Random(seed);

  @Test
  void killedUnderLoadEveryCompletionHasItsEffectAndEveryEffectItsCompletion() throws Exception {
    Path data = dir.resolve("killed");
    Map<IdempotencyKey, Long> acquired = new ConcurrentHashMap<>();
    Set<IdempotencyKey> acknowledged = ConcurrentHashMap.newKeySet();
    ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
    try (RedisServer redis = RedisServer.start(data, RedisServer.Aof.ALWAYS);
        RedisKeyStore store =
            RedisKeyStore.builder()
                .uri(redis.uri())
                .prefix("crash")
                .timeout(Duration.ofSeconds(2))
                .build()) {
      List<Future<?>> workers = new ArrayList<>();
      for (int w = 0; w < WORKERS; w++) {
        int worker = w;
        workers.add(pool.submit(() -> load(store, worker, acquired, acknowledged)));
      }
      Thread.sleep(700 + random.nextInt(800));
      long enough = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (acknowledged.size() < 100 && System.nanoTime() < enough) {
        Thread.sleep(10); // a loaded machine: wait for something to lose (bounded)
      }
      redis.kill();
      for (Future<?> f : workers) {
        f.get(60, TimeUnit.SECONDS);
      }
      Path copy = dir.resolve("as-killed");
      copyTree(data, copy);
      redis.restart();
      int completed;
      try (Reader r = new Reader(redis.uri(), store)) {
        completed = r.checkAtomic(acquired.keySet(), "after the restart");
        for (IdempotencyKey k : acknowledged) {
          assertThat(r.completed(k)).as("acknowledged under always: %s", k).isTrue();
        }
      }
      System.out.printf(
          "RedisEffectCrashTest seed %d: %d keys acquired, %d completions acknowledged, %d"
              + " completed after the kill -9 and restart, each with its effect once%n",
          seed, acquired.size(), acknowledged.size(), completed);
      assertThat(acknowledged).hasSizeGreaterThanOrEqualTo(1);
      cutInsideCompletions(copy, acquired.keySet());
    } finally {
      pool.shutdownNow();
    }
  }

  /** Acquires fresh keys and completes each with an effect until the server is gone. */
  private static void load(
      RedisKeyStore store,
      int worker,
      Map<IdempotencyKey, Long> acquired,
      Set<IdempotencyKey> acknowledged) {
    for (int i = 0; ; i++) {
      IdempotencyKey k = new IdempotencyKey("crash", worker + "-" + i);
      try {
        Acquisition a = join(store.acquire(k, FP, LONG, DAY));
        long token = ((Acquisition.Acquired) a).token();
        acquired.put(k, token);
        Settlement s = join(store.complete(k, token, response(k), effect(k, i % 4)));
        assertThat(s).isEqualTo(new Settlement.Done(0));
        acknowledged.add(k);
      } catch (CompletionException e) {
        assertThat(e).hasCauseInstanceOf(KeyStoreException.class);
        return;
      }
    }
  }

  /** Key {@code k}'s effect of kind {@code kind}: each leaves evidence that names {@code k}. */
  static RedisEffect effect(IdempotencyKey k, int kind) {
    byte[] name = k.key().getBytes(StandardCharsets.UTF_8);
    return switch (kind) {
      case 0 -> RedisEffect.push(NS + ":ledger", name);
      case 1 -> RedisEffect.set(NS + ":s:" + k.key(), name);
      case 2 -> RedisEffect.incrementBy(NS + ":n:" + k.key(), 1);
      default -> RedisEffect.hashSet(NS + ":h", k.key(), name);
    };
  }

  /**
   * For {@link #CUTS} completions' blocks in the killed server's AOF (the last ones and random
   * others), a copy cut inside the block: loaded, it has neither that completion nor its effect,
   * and every completion whose block ends before the cut, with its effect.
   */
  private void cutInsideCompletions(Path killed, Set<IdempotencyKey> keys) throws Exception {
    Path aof = newestIncrementalAof(killed);
    byte[] bytes = Files.readAllBytes(aof);
    List<Block> blocks = Block.completions(bytes);
    assertThat(blocks).as("completions in the AOF").hasSizeGreaterThanOrEqualTo(2);
    List<Block> chosen =
        new ArrayList<>(blocks.subList(Math.max(0, blocks.size() - 4), blocks.size()));
    while (chosen.size() < Math.min(CUTS, blocks.size())) {
      Block b = blocks.get(random.nextInt(blocks.size()));
      if (!chosen.contains(b)) {
        chosen.add(b);
      }
    }
    for (Block b : chosen) {
      // Strictly inside: after MULTI's first byte, before EXEC's last.
      long cut = b.start() + 1L + random.nextInt(b.end() - b.start() - 1);
      Path copy = dir.resolve("cut-" + cut);
      copyTree(killed, copy);
      try (RandomAccessFile f = new RandomAccessFile(newestIncrementalAof(copy).toFile(), "rw")) {
        f.setLength(cut);
      }
      try (RedisServer cutServer = RedisServer.start(copy, RedisServer.Aof.ALWAYS);
          RedisKeyStore store =
              RedisKeyStore.builder().uri(cutServer.uri()).prefix("crash").build();
          Reader r = new Reader(cutServer.uri(), store)) {
        String what = "AOF cut at byte " + cut + " inside the completions of " + b.keys();
        r.checkAtomic(keys, what);
        // A block is one script: one completion, or a batch of them; all are lost together.
        for (String k : b.keys()) {
          IdempotencyKey cutKey = new IdempotencyKey("crash", k);
          assertThat(r.completed(cutKey)).as(what).isFalse();
          assertThat(r.effects(cutKey)).as(what).isZero();
        }
        for (Block before : blocks) {
          if (before.end() <= b.start()) {
            for (String k : before.keys()) {
              assertThat(r.completed(new IdempotencyKey("crash", k))).as(what).isTrue();
            }
          }
        }
        // The server saw the torn block: a short read (cut inside a command) or an open MULTI at
        // the end of the file (cut between two of the block's commands).
        assertThat(cutServer.log())
            .as(what)
            .containsAnyOf("short read while loading", "Revert incomplete MULTI/EXEC");
      }
    }
  }

  /**
   * A script's MULTI/EXEC block in an AOF that completes keys: [start, end) in bytes, and the keys
   * it completes (more than one when the store sent a batch of completions in one script).
   */
  record Block(int start, int end, List<String> keys) {

    /** The completions' blocks (those that SET a record completed), in file order. */
    static List<Block> completions(byte[] aof) {
      List<Block> out = new ArrayList<>();
      int at = 0;
      int multi = -1;
      List<String> keys = new ArrayList<>();
      while (at < aof.length) {
        int start = at;
        List<String> cmd = new ArrayList<>();
        at = parse(aof, at, cmd);
        if (at < 0) {
          break; // a torn last command
        }
        String name = cmd.get(0).toUpperCase(java.util.Locale.ROOT);
        if (name.equals("MULTI")) {
          multi = start;
          keys = new ArrayList<>();
        } else if (name.equals("SET")
            && cmd.size() > 2
            && cmd.get(1).startsWith(NS + ":k:")
            && cmd.get(2).startsWith("\u0002")) { // a packed record, completed (docs/KEYS.md)
          String record = cmd.get(1); // {crash}:k:<scope length>:crash:<key>
          keys.add(record.substring(record.indexOf(":crash:") + ":crash:".length()));
        } else if (name.equals("EXEC")) {
          if (multi >= 0 && !keys.isEmpty()) {
            out.add(new Block(multi, at, List.copyOf(keys)));
          }
          multi = -1;
        }
      }
      return out;
    }

    /** Parses one RESP array of bulk strings at {@code at} into {@code cmd}; the next offset. */
    private static int parse(byte[] b, int at, List<String> cmd) {
      int[] n = new int[1];
      at = number(b, at, '*', n);
      for (int i = 0; i < n[0] && at >= 0; i++) {
        int[] len = new int[1];
        at = number(b, at, '$', len);
        if (at < 0 || at + len[0] + 2 > b.length) {
          return -1;
        }
        cmd.add(new String(b, at, len[0], StandardCharsets.UTF_8));
        at += len[0] + 2;
      }
      return at;
    }

    private static int number(byte[] b, int at, char type, int[] out) {
      if (at >= b.length || b[at] != type) {
        return -1;
      }
      int end = at + 1;
      while (end + 1 < b.length && !(b[end] == '\r' && b[end + 1] == '\n')) {
        end++;
      }
      if (end + 1 >= b.length) {
        return -1;
      }
      out[0] = Integer.parseInt(new String(b, at + 1, end - at - 1, StandardCharsets.US_ASCII));
      return end + 2;
    }
  }

  /** Reads completions and effects back through a connection of its own. */
  static final class Reader implements AutoCloseable {
    final RedisClient client;
    final StatefulRedisConnection<String, String> connection;
    final RedisKeyStore store;
    final RedisKeyStore shown; // its own store, connected to the server as it is now

    Reader(String uri, RedisKeyStore store) {
      this.client = RedisClient.create(uri);
      this.connection = client.connect();
      this.store = store;
      this.shown = RedisKeyStore.builder().client(client).prefix("crash").build();
    }

    RedisCommands<String, String> redis() {
      return connection.sync();
    }

    boolean completed(IdempotencyKey k) {
      return shown
          .show(k)
          .toCompletableFuture()
          .join()
          .map(RedisKeyRecord::completed)
          .orElse(false);
    }

    /** How many times key {@code k}'s effect is present (whichever kind it was). */
    long effects(IdempotencyKey k) {
      long n = 0;
      for (String e : redis().lrange(NS + ":ledger", 0, -1)) {
        n += e.equals(k.key()) ? 1 : 0;
      }
      n += redis().exists(NS + ":s:" + k.key());
      String count = redis().get(NS + ":n:" + k.key());
      n += count == null ? 0 : Long.parseLong(count);
      n += redis().hexists(NS + ":h", k.key()) ? 1 : 0;
      return n;
    }

    /** Every key: completed iff its effect is there, and the effect at most once. */
    int checkAtomic(Set<IdempotencyKey> keys, String when) {
      int completed = 0;
      for (IdempotencyKey k : keys) {
        boolean done = completed(k);
        long fx = effects(k);
        assertThat(fx)
            .as("%s: effects of %s (completed: %s)", when, k, done)
            .isEqualTo(done ? 1 : 0);
        completed += done ? 1 : 0;
      }
      return completed;
    }

    @Override
    public void close() {
      shown.close();
      connection.close();
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  private static Path newestIncrementalAof(Path data) throws IOException {
    try (Stream<Path> files = Files.list(data.resolve("appendonlydir"))) {
      return files
          .filter(p -> p.getFileName().toString().endsWith(".incr.aof"))
          .max(Comparator.comparing(p -> p.getFileName().toString()))
          .orElseThrow(() -> new IllegalStateException("no incremental AOF in " + data));
    }
  }

  private static void copyTree(Path from, Path to) throws IOException {
    try (Stream<Path> files = Files.walk(from)) {
      for (Path p : files.toList()) {
        Path target = to.resolve(from.relativize(p).toString());
        if (Files.isDirectory(p)) {
          Files.createDirectories(target);
        } else if (!p.getFileName().toString().startsWith("redis.")) {
          Files.copy(p, target); // the data, not the server's log and output
        }
      }
    }
  }

  private static byte[] response(IdempotencyKey k) {
    return ("paid " + k.key()).getBytes(StandardCharsets.UTF_8);
  }

  private static <T> T join(CompletionStage<T> s) {
    return s.toCompletableFuture().join();
  }
}
