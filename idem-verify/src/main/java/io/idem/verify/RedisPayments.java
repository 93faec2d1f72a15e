package io.idem.verify;

import io.idem.keys.Fingerprint;
import io.idem.keys.KeyStoreException;
import io.idem.keys.redis.RedisEffect;
import io.idem.keys.redis.RedisKeyStore;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisListCommands;
import io.lettuce.core.api.sync.RedisStringCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.codec.ByteArrayCodec;
import io.lettuce.core.codec.RedisCodec;
import io.lettuce.core.codec.StringCodec;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.Supplier;

/**
 * The keys campaign on the Redis store: {@link RedisKeyStore} on a private redis-server ({@link
 * RedisServers}: {@code appendfsync always}, killed with SIGKILL and restarted). A payment acquires
 * {@code payments/pay-i} and completes it with the ledger entry pushed to {@code
 * {payments}:ledger:account} by a {@link RedisEffect} in the completion's script: the entry lands
 * with the completion, under the token that owns the key, or not at all. Redis has no fenced write
 * of its own, so no status record is written.
 *
 * <p>On Redis Cluster ({@code redis-cluster}: {@link RedisClusterServers}, six nodes, killed
 * masters, CLUSTER FAILOVER and slot moves) the store waits for one replica after each script
 * ({@link RedisKeyStore.Builder#waitForReplicas}): an acknowledged completion is on the replica
 * that takes over. The namespace, its records and its ledger lists share one slot.
 *
 * <p>The checker reads Redis directly, by the layout docs/KEYS.md documents, not through the store:
 * the record {@code {payments}:k:8:payments:pay-i} (a packed string: its token and response) and
 * the ledger lists.
 */
final class RedisPayments implements PaymentStore {
  /** The store's namespace (and hash tag). */
  static final String PREFIX = "payments";

  /** On Redis Cluster: the replicas a completion waits for, and how long. */
  static final int CLUSTER_WAIT_REPLICAS = 1;

  static final Duration CLUSTER_WAIT_TIMEOUT = Duration.ofMillis(500);

  private final boolean cluster;

  /** On one redis-server ({@code redis}), or on Redis Cluster ({@code redis-cluster}). */
  RedisPayments(boolean cluster) {
    this.cluster = cluster;
  }

  @Override
  public String name() {
    return cluster ? "redis-cluster" : "redis";
  }

  @Override
  public Capabilities capabilities() {
    return Capabilities.KEY_STORE;
  }

  @Override
  public Servers start(Path dir) {
    return cluster
        ? RedisClusterServers.start(dir.resolve("redis-cluster"))
        : RedisServers.start(dir.resolve("redis"));
  }

  @Override
  public PaymentBackend connect(String address, Writes writes, boolean settler) {
    PaymentStore.requireFencedCompletion("redis", writes);
    Duration timeout = Duration.ofSeconds(settler ? 30 : 2);
    RedisKeyStore store;
    try {
      RedisKeyStore.Builder b = RedisKeyStore.builder().prefix(PREFIX).timeout(timeout);
      if (cluster) {
        b.clusterUri(address.split(","))
            .waitForReplicas(CLUSTER_WAIT_REPLICAS, CLUSTER_WAIT_TIMEOUT);
      } else {
        b.uri(address);
      }
      store = b.build();
    } catch (KeyStoreException e) {
      throw new PaymentBackend.Unavailable("cannot connect to " + address, e);
    }
    AbstractRedisClient readerClient = null;
    try {
      RedisCodec<String, byte[]> binary = RedisCodec.of(StringCodec.UTF8, ByteArrayCodec.INSTANCE);
      if (cluster) {
        RedisClusterClient c = clusterReader(address);
        readerClient = c;
        StatefulRedisClusterConnection<String, String> text = c.connect();
        StatefulRedisClusterConnection<String, byte[]> records = c.connect(binary);
        return new Backend(store, c, text, records, text.sync(), records.sync());
      }
      RedisClient c = RedisClient.create(address);
      readerClient = c;
      StatefulRedisConnection<String, String> text = c.connect();
      StatefulRedisConnection<String, byte[]> records = c.connect(binary);
      return new Backend(store, c, text, records, text.sync(), records.sync());
    } catch (RuntimeException e) {
      if (readerClient != null) {
        readerClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
      store.close();
      throw new PaymentBackend.Unavailable("cannot connect to " + address, e);
    }
  }

  /** The checker's own cluster client: it follows MOVED and learns of failovers. */
  @SuppressWarnings("deprecation") // the adaptive triggers: see RedisKeyStore's own cluster client
  private static RedisClusterClient clusterReader(String address) {
    List<RedisURI> seeds = new ArrayList<>();
    for (String seed : address.split(",")) {
      seeds.add(RedisURI.create(seed));
    }
    RedisClusterClient c = RedisClusterClient.create(seeds);
    c.setOptions(
        ClusterClientOptions.builder()
            .topologyRefreshOptions(
                ClusterTopologyRefreshOptions.builder()
                    .enablePeriodicRefresh(Duration.ofSeconds(5))
                    .enableAdaptiveRefreshTrigger(
                        ClusterTopologyRefreshOptions.RefreshTrigger.MOVED_REDIRECT,
                        ClusterTopologyRefreshOptions.RefreshTrigger.PERSISTENT_RECONNECTS)
                    .build())
            .build());
    return c;
  }

  /** The ledger list of {@code account}, in the namespace. */
  static String ledgerKey(int account) {
    return "{" + PREFIX + "}:ledger:" + account;
  }

  /** Payments over a {@link RedisKeyStore}; reads for the checker over a connection of its own. */
  private static final class Backend implements PaymentBackend {
    private final RedisKeyStore store;
    private final AbstractRedisClient readerClient;
    private final StatefulConnection<String, String> reader;
    private final StatefulConnection<String, byte[]> records; // packed, binary
    private final RedisListCommands<String, String> lists;
    private final RedisStringCommands<String, byte[]> strings;

    Backend(
        RedisKeyStore store,
        AbstractRedisClient readerClient,
        StatefulConnection<String, String> reader,
        StatefulConnection<String, byte[]> records,
        RedisListCommands<String, String> lists,
        RedisStringCommands<String, byte[]> strings) {
      this.store = store;
      this.readerClient = readerClient;
      this.reader = reader;
      this.records = records;
      this.lists = lists;
      this.strings = strings;
    }

    @Override
    public Claim acquire(Payment p, Duration inProgress) {
      Acquisition a =
          join(
              p,
              store.acquire(
                  p.idempotencyKey(),
                  Fingerprint.of(p.fingerprint()),
                  inProgress,
                  Duration.ofHours(1)));
      if (a instanceof Acquisition.Completed c) {
        return new Claim.Done(new String(c.response(), StandardCharsets.UTF_8));
      }
      if (a instanceof Acquisition.Mismatch) {
        return new Claim.Mismatch();
      }
      if (a instanceof Acquisition.Acquired owned) {
        return new Claim.Owned(owned.token());
      }
      return new Claim.Busy();
    }

    @Override
    public Attempt pay(Payment p, long token) {
      String response = p.response(token);
      RedisEffect ledger =
          RedisEffect.push(ledgerKey(p.account()), p.entry(token).getBytes(StandardCharsets.UTF_8));
      Settlement s =
          join(
              p,
              store.complete(
                  p.idempotencyKey(), token, response.getBytes(StandardCharsets.UTF_8), ledger));
      // Fenced, or Completed by another owner first: not this owner's payment.
      return s instanceof Settlement.Done ? new Attempt.Paid(response) : new Attempt.Fenced(false);
    }

    private static <T> T join(Payment p, CompletionStage<T> stage) {
      try {
        return stage.toCompletableFuture().join();
      } catch (CompletionException e) {
        if (e.getCause() instanceof KeyStoreException k) {
          throw new Unavailable("payment " + p.i() + ": " + k.getMessage(), k);
        }
        throw e;
      }
    }

    @Override
    public List<String> ledger(int account) {
      return read(() -> lists.lrange(ledgerKey(account), 0, -1));
    }

    @Override
    public Optional<KeyState> key(Payment p) {
      String scope = IdemPayments.SCOPE;
      String record =
          "{"
              + PREFIX
              + "}:k:"
              + scope.getBytes(StandardCharsets.UTF_8).length
              + ":"
              + scope
              + ":"
              + p.key();
      byte[] packed = read(() -> strings.get(record));
      return packed == null ? Optional.empty() : Optional.of(decode(record, packed));
    }

    /**
     * A record as docs/KEYS.md lays it out: a layout byte (1 in progress, 2 completed), four
     * big-endian doubles (token, deadline, retention, completion), the fingerprint and the attempt
     * id (each a 16-bit length and its bytes), then the response.
     */
    static KeyState decode(String record, byte[] packed) {
      ByteBuffer b = ByteBuffer.wrap(packed);
      try {
        int state = b.get();
        if (state != 1 && state != 2) {
          throw new IllegalStateException(
              record + " is not a key record (layout byte " + state + ")");
        }
        long token = (long) b.getDouble();
        b.position(b.position() + 3 * Double.BYTES);
        for (int field = 0; field < 2; field++) { // the fingerprint, the attempt id
          int length = Short.toUnsignedInt(b.getShort());
          b.position(b.position() + length);
        }
        String response =
            state == 2
                ? new String(packed, b.position(), b.remaining(), StandardCharsets.UTF_8)
                : null;
        return new KeyState(state == 2, token, response);
      } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
        throw new IllegalStateException(record + " is cut short: " + packed.length + " bytes", e);
      }
    }

    private static <T> T read(Supplier<T> call) {
      try {
        return call.get();
      } catch (RedisException e) {
        throw new Unavailable("read: " + e.getMessage(), e);
      }
    }

    @Override
    public void close() {
      records.close();
      reader.close();
      readerClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      store.close();
    }
  }
}
