package io.idem.keys.redis;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.KeyStoreFullException;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.KeyStore;
import io.idem.keys.spi.Settlement;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SocketOptions;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.cluster.ClusterClientOptions;
import io.lettuce.core.cluster.ClusterTopologyRefreshOptions;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.SlotHash;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.models.partitions.RedisClusterNode;
import io.lettuce.core.codec.ByteArrayCodec;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * The key store on Redis (single node, a primary found through Sentinel, or Redis Cluster), with
 * Lettuce.
 *
 * <p><b>One script per transition.</b> Acquire, complete, release and renew each run inside one Lua
 * script ({@code src/main/resources/io/idem/keys/redis/transitions.lua}), so each is atomic and one
 * round trip: there is no window between reading the record and writing it, of the kind seed 001
 * has to argue away between its {@code SET NX}, {@code GET} and {@code INCRBY}. Scripts run by
 * EVALSHA; when the server answers NOSCRIPT (its script cache was flushed, or it restarted) the
 * store sends the body with EVAL. The fingerprint is compared inside the script.
 *
 * <p><b>Batches.</b> While a script is in flight on the store's connection, further calls wait (for
 * the script in flight) and then go together in one script (at most {@link Builder#maxBatch}),
 * which runs them one after the other, each deciding as it would alone. Under light load every call
 * is a script of its own; under heavy load Redis pays the per-script costs once per batch ({@link
 * ScriptBatcher}). {@code maxBatch(1)} sends every call at once instead.
 *
 * <p><b>The server's clock.</b> Each script reads {@code TIME} on the Redis server: deadlines,
 * takeovers and retention are decided on that one clock, never on the application hosts'. A record
 * lives for its owner's timeout plus the retention, then for the retention after it completes
 * ({@code PEXPIRE} computed in the script).
 *
 * <p><b>Fencing tokens.</b> One counter per namespace ({@code {prefix}:token}, never expiring)
 * numbers every acquire, and each token is {@code max(counter + 1, server time in µs)}. A counter
 * per record would be wrong: the record expires with its counter, the next acquire of the key would
 * hand out token 1 again, and an owner stalled since before the expiry would complete the new
 * record with its old, equal token. The clock term keeps tokens growing even if the counter is lost
 * with the tail of an AOF (a crash under {@code appendfsync everysec}): every token handed out
 * before was at most the clock then, and the clock has moved on (unless the server's clock is set
 * back by more than the outage). See docs/KEYS.md, "Redis store".
 *
 * <p><b>Completions that carry the business write.</b> {@link #complete(IdempotencyKey, long,
 * byte[], RedisEffect)} applies one {@link RedisEffect} ({@code RPUSH}, {@code SET}, {@code INCRBY}
 * or {@code HSET} on a key of the namespace) in the completion's script, only if the token still
 * owns the key: the write and the completion land together or not at all. Fencing stops a stale
 * owner; this stops a redo by the next owner after a crash between the write and the completion.
 *
 * <p><b>Cluster.</b> Every key of a namespace carries the hash tag {@code {prefix}}, so a namespace
 * lives in one hash slot and a script touches one slot: the counter, the records and every {@link
 * RedisEffect} share it, and the batcher's scripts never cross slots. On Redis Cluster ({@link
 * Builder#clusterUri}, {@link Builder#clusterClient}) Lettuce follows MOVED and ASK and the store's
 * own client refreshes its topology on adaptive triggers; a namespace then lives on one master
 * (spread load with several namespaces). Tested on a real cluster of six redis-server processes
 * under kill -9 of a master, CLUSTER FAILOVER and slot moves (docs/KEYS.md, "On Redis Cluster").
 *
 * <p><b>Replicas and durability.</b> Redis replicates asynchronously: a completion acknowledged by
 * a master that dies before its replica has it is lost at failover. {@link Builder#waitForReplicas}
 * sends {@code WAIT} after each script on the node that ran it, and fails the script's calls with
 * {@link KeyStoreException} (outcome unknown) when too few replicas acknowledged. {@link
 * Builder#build()} names a Redis that has neither an AOF nor a replica (a WARNING, or a refusal
 * with {@link Builder#requireDurability}).
 *
 * <p><b>Errors.</b> A bad argument fails the stage with {@link IllegalArgumentException}. A Redis
 * error, a timeout (the builder's {@link Builder#timeout}) or a lost connection fails it with
 * {@link KeyStoreException}: the outcome is unknown, never a yes, and a retry with the same key is
 * safe (an acquire that landed answers in progress; an acquire or a completion that Lettuce resends
 * after a reconnect answers as the first did).
 *
 * <p>Thread-safe; calls do not block: stages complete on Lettuce's I/O threads, or on the {@link
 * Builder#completionExecutor} if one is set (do not block in stages that depend on them otherwise).
 * {@link #close()} closes the store's connection, and the client too if the store created it from a
 * URI; a client passed in stays the caller's to shut down.
 */
public final class RedisKeyStore implements KeyStore<RedisEffect>, AutoCloseable {

  /** Default {@link Builder#prefix}. */
  public static final String DEFAULT_PREFIX = "idem:keys";

  /** Default {@link Builder#timeout}: 5 s. */
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(5);

  /** Default {@link Builder#maxResponseBytes}: 64 KiB, as on the Idem store. */
  public static final int DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

  /** The largest {@link Builder#maxResponseBytes}: 16 MiB. */
  public static final int MAX_RESPONSE_BYTES_LIMIT = 16 * 1024 * 1024;

  /** Default {@link Builder#maxBatch}: 64 calls per script. */
  public static final int DEFAULT_MAX_BATCH = 64;

  /** The largest {@link Builder#maxBatch}. */
  public static final int MAX_BATCH_LIMIT = 1024;

  /** The longest in-progress timeout, renewal or retention: 7 days, as on the Idem store. */
  public static final Duration MAX_DURATION = Duration.ofDays(7);

  /** The longest {@link Builder#prefix}, in characters. */
  public static final int MAX_PREFIX_CHARS = 128;

  /** Default {@link Builder#waitForReplicas}: 0, no WAIT. */
  public static final int DEFAULT_WAIT_REPLICAS = 0;

  /**
   * How often a cluster client the store creates ({@link Builder#clusterUri}) reads the topology
   * anew, besides the adaptive refreshes that MOVED, ASK and lost connections trigger.
   */
  public static final Duration CLUSTER_TOPOLOGY_REFRESH = Duration.ofSeconds(10);

  private static final System.Logger LOG = System.getLogger(RedisKeyStore.class.getName());

  private final StatefulConnection<byte[], byte[]> connection;
  private final @Nullable AbstractRedisClient ownedClient;
  private final ScriptCodec codec;
  private final Duration timeout;
  private volatile boolean closed;
  private final @Nullable Executor completions;
  private final String attemptPrefix;
  private final AtomicLong attempts = new AtomicLong();
  private final ScriptBatcher batcher;
  private final AcquireRecovery recovery;

  private RedisKeyStore(
      Builder b,
      @Nullable AbstractRedisClient ownedClient,
      StatefulConnection<byte[], byte[]> connection,
      RedisScriptingAsyncCommands<byte[], byte[]> redis,
      ScriptBatcher.@Nullable AfterScript after) {
    this.connection = connection;
    this.ownedClient = ownedClient;
    this.codec = new ScriptCodec(b.prefix, b.maxResponseBytes);
    this.timeout = b.timeout;
    this.completions = b.completionExecutor;
    byte[] nonce = new byte[16];
    new SecureRandom().nextBytes(nonce);
    this.attemptPrefix = Base64.getUrlEncoder().withoutPadding().encodeToString(nonce) + ":";
    this.batcher =
        new ScriptBatcher(redis, codec.counterKey(), b.maxBatch, b.timeout.toNanos(), after);
    this.recovery = new AcquireRecovery(batcher, timeout, () -> closed, this::release);
  }

  /** A builder: give it a {@link Builder#client} or a {@link Builder#uri}. */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * {@inheritDoc}
   *
   * <p>An acquire whose answer did not come (a timeout, a lost connection) may still land, leaving
   * the key held by an owner that never runs until its in-progress timeout passes. The store then
   * sends the same attempt again in the background, every {@link Builder#timeout}, until Redis
   * answers or the in-progress timeout has passed: the script answers a resent attempt as it
   * answered the first (or acquires now, if the first never landed), and an acquisition found this
   * way is released. At most {@link #MAX_RECOVERIES} such keys are followed at once.
   */
  @Override
  public CompletionStage<Acquisition> acquire(
      IdempotencyKey key, Fingerprint fingerprint, Duration inProgressTimeout, Duration retention) {
    ScriptBatcher.Call[] attempt = new ScriptBatcher.Call[1];
    long startNanos = System.nanoTime();
    CompletionStage<Acquisition> answer =
        call(
            key,
            () -> {
              ScriptCodec.require(
                  fingerprint != null, "fingerprint must not be null (Fingerprint.none(): none)");
              long timeoutMs = ScriptCodec.millis("in-progress timeout", inProgressTimeout);
              long retentionMs = ScriptCodec.millis("retention", retention);
              attempt[0] =
                  new ScriptBatcher.Call(
                      'A',
                      new byte[][] {recordKey(key)},
                      fingerprint.bytes(),
                      ScriptCodec.ascii(timeoutMs),
                      ScriptCodec.ascii(retentionMs),
                      // A fresh id per call: Lettuce may resend this very command after a
                      // reconnect, and the script then answers what the first run answered.
                      attemptId());
              return batcher.submit(attempt[0]);
            },
            ScriptCodec::acquisition);
    answer.whenComplete(
        (a, failure) -> {
          if (failure != null && attempt[0] != null) {
            recovery.follow(key, attempt[0], failure, startNanos + inProgressTimeout.toNanos());
          }
        });
    return answer;
  }

  /** How many timed-out acquires the store follows at once (see {@link #acquire}). */
  public static final int MAX_RECOVERIES = 1024;

  @Override
  public CompletionStage<Settlement> complete(IdempotencyKey key, long token, byte[] response) {
    return call(
        key,
        () -> {
          codec.checkResponse(response);
          return batcher.submit(
              new ScriptBatcher.Call(
                  'C', new byte[][] {recordKey(key)}, ScriptCodec.ascii(token), response));
        },
        ScriptCodec::settlement);
  }

  /**
   * Stores {@code response} as the key's outcome and applies {@code effect}, in one Lua script, if
   * {@code token} still owns the key: both land, or neither. A stale token ({@link
   * Settlement.Fenced}) applies nothing. A completion resent after a lost answer (same token, same
   * response) answers {@link Settlement.Done} and does not apply the effect again. This is what
   * makes a business write that lives in Redis exactly-once across an owner's crash: with the write
   * and the completion separate, an owner dying between them leaves a write without a completion,
   * and the next owner, whose newer token is valid, writes again.
   *
   * <p>Durability is the AOF's: with {@code appendfsync always} an acknowledged completion and its
   * effect survive a kill -9 of redis-server; whatever is lost (a tail under {@code everysec}) is
   * lost as a whole, the completion with its effect (Redis writes a script's writes as one {@code
   * MULTI}/{@code EXEC} block and drops an incomplete one when it loads the AOF).
   *
   * @param effect the write; null: none, as {@link #complete(IdempotencyKey, long, byte[])}
   * @return a stage that fails with {@link IllegalArgumentException} on a bad argument (an effect
   *     key outside the namespace or on the store's own keys, an oversize value), with {@link
   *     RedisEffectRefusedException} if Redis refused the effect for what its key holds (nothing
   *     written, the key still in progress under {@code token}), and with {@link KeyStoreException}
   *     if the outcome is unknown
   */
  public CompletionStage<Settlement> complete(
      IdempotencyKey key, long token, byte[] response, RedisEffect effect) {
    if (effect == null) {
      return complete(key, token, response);
    }
    return call(
        key,
        () -> {
          codec.checkResponse(response);
          byte[][] keys = {recordKey(key), codec.effectKey(effect)};
          return batcher.submit(
              new ScriptBatcher.Call('E', keys, codec.effectArgs(token, response, effect)));
        },
        reply -> {
          if (ScriptCodec.tag(reply).equals("E")) {
            throw new RedisEffectRefusedException(
                key, effect, new String(ScriptCodec.bytes(reply, 1), StandardCharsets.UTF_8));
          }
          return ScriptCodec.settlement(reply);
        });
  }

  /**
   * The key's record, read in one script with the transitions (so it sees them in order), or empty
   * if there is none (never acquired, released, or expired). For operators and tests: the record is
   * a packed string that {@code redis-cli GET} does not show readably.
   *
   * @return a stage that fails with {@link KeyStoreException} if Redis did not answer
   */
  public CompletionStage<Optional<RedisKeyRecord>> show(IdempotencyKey key) {
    return call(
        key,
        () -> batcher.submit(new ScriptBatcher.Call('S', new byte[][] {recordKey(key)})),
        ScriptCodec::record);
  }

  /**
   * The namespace's hash tag, {@code {prefix}}: every Redis key the store writes, and every {@link
   * RedisEffect}'s key, starts with it.
   */
  public String hashTag() {
    return codec.hashTag();
  }

  /**
   * The executor's way to the effect above ({@link KeyStore#completeWith}): as {@link
   * #complete(IdempotencyKey, long, byte[], RedisEffect)}.
   */
  @Override
  public CompletionStage<Settlement> completeWith(
      IdempotencyKey key, long token, byte[] response, RedisEffect effect) {
    return complete(key, token, response, effect);
  }

  @Override
  public Class<?> effectType() {
    return RedisEffect.class;
  }

  @Override
  public CompletionStage<Settlement> release(IdempotencyKey key, long token) {
    return call(
        key,
        () ->
            batcher.submit(
                new ScriptBatcher.Call(
                    'R', new byte[][] {recordKey(key)}, ScriptCodec.ascii(token))),
        ScriptCodec::settlement);
  }

  @Override
  public CompletionStage<Settlement> renew(IdempotencyKey key, long token, Duration extension) {
    return call(
        key,
        () -> {
          long ms = ScriptCodec.millis("extension", extension);
          return batcher.submit(
              new ScriptBatcher.Call(
                  'N',
                  new byte[][] {recordKey(key)},
                  ScriptCodec.ascii(token),
                  ScriptCodec.ascii(ms)));
        },
        ScriptCodec::settlement);
  }

  /**
   * Closes the store's connection; and the client, if the store created it from a URI. Stages still
   * pending (sent, or waiting for a batch) fail with {@link KeyStoreException}.
   */
  @Override
  public void close() {
    closed = true;
    batcher.close();
    connection.close();
    if (ownedClient != null) {
      ownedClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  /**
   * A fresh attempt id: this store's 128 random bits (drawn once, so that no two stores share them
   * but with negligible chance), then a counter. Cheaper than a random UUID per call, which draws
   * from SecureRandom under a lock on the hot path.
   */
  private byte[] attemptId() {
    return (attemptPrefix + Long.toString(attempts.incrementAndGet(), 36))
        .getBytes(StandardCharsets.US_ASCII);
  }

  /** The namespace's token counter key. */
  byte[] counterKey() {
    return codec.counterKey().clone();
  }

  /**
   * The record's Redis key (see {@link ScriptCodec#recordKey}).
   *
   * @throws IllegalArgumentException if {@code key} is null
   */
  byte[] recordKey(IdempotencyKey key) {
    return codec.recordKey(key);
  }

  /** The batcher, for tests: how many scripts carried how many transitions. */
  ScriptBatcher batcher() {
    return batcher;
  }

  // ---- calls and answers ----

  /** A script call that may refuse its arguments at once (with IllegalArgumentException). */
  private interface ScriptCall {
    CompletableFuture<List<Object>> start();
  }

  private <T> CompletionStage<T> call(
      IdempotencyKey key, ScriptCall op, Function<List<Object>, T> decode) {
    CompletableFuture<List<Object>> sent;
    try {
      sent = op.start();
    } catch (IllegalArgumentException e) {
      return CompletableFuture.failedFuture(e);
    } catch (RuntimeException e) {
      return CompletableFuture.failedFuture(translate(key, e));
    }
    CompletableFuture<T> out = new CompletableFuture<>();
    sent.orTimeout(timeout.toNanos(), TimeUnit.NANOSECONDS)
        .whenComplete(
            (reply, failure) -> {
              if (failure != null) {
                finish(() -> out.completeExceptionally(translate(key, failure)));
                return;
              }
              T value;
              try {
                value = decode.apply(reply);
              } catch (RuntimeException e) {
                finish(() -> out.completeExceptionally(translate(key, e)));
                return;
              }
              finish(() -> out.complete(value));
            });
    return out;
  }

  private void finish(Runnable r) {
    if (completions == null) {
      r.run();
    } else {
      completions.execute(r);
    }
  }

  private RuntimeException translate(IdempotencyKey key, Throwable e) {
    Throwable t = e;
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    if (t instanceof KeyStoreException || t instanceof RedisEffectRefusedException) {
      return (RuntimeException) t; // a definite refusal stays one
    }
    if (t instanceof ReplicaWait.ReplicasBehindException) {
      return new KeyStoreException(
          key,
          "the transition ran, but not on enough replicas: the outcome is unknown (a failover"
              + " may lose it): "
              + t.getMessage(),
          t);
    }
    if (t instanceof TimeoutException) {
      return new KeyStoreException(key, "Redis did not answer within " + timeout, t);
    }
    if (t instanceof RedisCommandExecutionException
        && t.getMessage() != null
        && t.getMessage().contains("OOM command not allowed")) {
      // Refused before the script ran (or at its first write, which comes before any other):
      // nothing was written.
      return new KeyStoreFullException(
          key, "Redis is at its maxmemory and refuses writes: " + t.getMessage(), false, t);
    }
    return new KeyStoreException(key, "Redis did not settle it: " + t, t);
  }

  /** Builds a {@link RedisKeyStore}. Not thread-safe. */
  public static final class Builder {
    private @Nullable RedisClient client;
    private @Nullable RedisURI uri;
    private @Nullable RedisClusterClient clusterClient;
    private @Nullable List<RedisURI> clusterUris;
    private int waitReplicas = DEFAULT_WAIT_REPLICAS;
    private Duration waitTimeout = Duration.ZERO;
    private boolean requireDurability;
    private String prefix = DEFAULT_PREFIX;
    private Duration timeout = DEFAULT_TIMEOUT;
    private int maxResponseBytes = DEFAULT_MAX_RESPONSE_BYTES;
    private int maxBatch = DEFAULT_MAX_BATCH;
    private @Nullable Executor completionExecutor;

    private Builder() {}

    /**
     * Connect with {@code client}, which stays the caller's: {@link RedisKeyStore#close()} closes
     * only the store's connection. Its options apply; {@code REJECT_COMMANDS} as disconnected
     * behaviour fails calls at once while the connection is down (the store's own {@link #timeout}
     * bounds every call in any case).
     */
    public Builder client(RedisClient client) {
      if (client == null) {
        throw new IllegalArgumentException("client must not be null");
      }
      this.client = client;
      return this;
    }

    /**
     * Connect to {@code uri} ({@code redis://host:port/db}, {@code redis-sentinel://...}) with a
     * client the store creates, owns and shuts down on close. It reconnects by itself, and fails
     * calls with {@link KeyStoreException} while disconnected instead of queueing them.
     */
    public Builder uri(String uri) {
      try {
        return uri(RedisURI.create(uri));
      } catch (RuntimeException e) {
        throw new IllegalArgumentException("not a Redis URI: " + uri, e);
      }
    }

    /** As {@link #uri(String)}. */
    public Builder uri(RedisURI uri) {
      if (uri == null) {
        throw new IllegalArgumentException("uri must not be null");
      }
      this.uri = uri;
      return this;
    }

    /**
     * Connect to Redis Cluster with {@code client}, which stays the caller's. Lettuce follows MOVED
     * and ASK; give the client {@link ClusterTopologyRefreshOptions} with adaptive triggers so that
     * it learns of a failover soon (the store's own client, {@link #clusterUri}, has them).
     */
    public Builder clusterClient(RedisClusterClient client) {
      if (client == null) {
        throw new IllegalArgumentException("clusterClient must not be null");
      }
      this.clusterClient = client;
      return this;
    }

    /**
     * Connect to Redis Cluster through {@code seeds} ({@code redis://host:port}, one or more nodes)
     * with a client the store creates, owns and shuts down on close: it follows MOVED and ASK,
     * reads the topology again on every adaptive trigger (MOVED, ASK, lost connections) and every
     * {@link #CLUSTER_TOPOLOGY_REFRESH}, and fails calls with {@link KeyStoreException} while a
     * node is disconnected instead of queueing them.
     */
    public Builder clusterUri(String... seeds) {
      if (seeds == null || seeds.length == 0) {
        throw new IllegalArgumentException("clusterUri needs at least one seed node");
      }
      List<RedisURI> out = new ArrayList<>();
      for (String seed : seeds) {
        try {
          out.add(RedisURI.create(seed));
        } catch (RuntimeException e) {
          throw new IllegalArgumentException("not a Redis URI: " + seed, e);
        }
      }
      this.clusterUris = List.copyOf(out);
      return this;
    }

    /**
     * After each script, {@code WAIT replicas timeout} on the node that ran it: a call is answered
     * only once its writes are on {@code replicas} replicas, and if fewer acknowledged in {@code
     * timeout} it fails with {@link KeyStoreException}, its outcome unknown (the write happened on
     * the master, and a failover may lose it), never with a yes. Redis replication is asynchronous:
     * without this, a completion acknowledged by a master that dies before its replica received it
     * is lost when the replica takes over, and its retry runs the business step again. WAIT does
     * not make Redis a consensus system (a failover may still elect a replica that did not
     * acknowledge, when a master has several), but with one replica per master, as in a usual
     * cluster, an acknowledged completion survives the master's loss. Default 0: no WAIT. {@code
     * timeout} must be shorter than {@link #timeout}.
     */
    public Builder waitForReplicas(int replicas, Duration timeout) {
      if (replicas < 0) {
        throw new IllegalArgumentException("replicas must be at least 0, got " + replicas);
      }
      if (timeout == null || (replicas > 0 && timeout.toMillis() < 1)) {
        throw new IllegalArgumentException(
            "the WAIT timeout must be at least 1 ms, got " + timeout);
      }
      this.waitReplicas = replicas;
      this.waitTimeout = timeout;
      return this;
    }

    /**
     * Whether {@link #build()} refuses a Redis that cannot keep an acknowledged write through a
     * kill -9: no AOF and no connected replica (on Redis Cluster: any master so). Default false:
     * such a Redis is logged as a WARNING and used. Either way, a server whose CONFIG and INFO
     * cannot be read is logged as a WARNING, not refused.
     */
    public Builder requireDurability(boolean require) {
      this.requireDurability = require;
      return this;
    }

    /**
     * The namespace: every Redis key the store writes starts with {@code {prefix}}. 1 to {@value
     * #MAX_PREFIX_CHARS} characters, no braces (it is the hash tag). Default {@value
     * #DEFAULT_PREFIX}.
     */
    public Builder prefix(String prefix) {
      if (prefix == null
          || prefix.isEmpty()
          || prefix.length() > MAX_PREFIX_CHARS
          || prefix.indexOf('{') >= 0
          || prefix.indexOf('}') >= 0) {
        throw new IllegalArgumentException(
            "prefix must have 1 to "
                + MAX_PREFIX_CHARS
                + " characters and no braces, got "
                + prefix);
      }
      this.prefix = prefix;
      return this;
    }

    /** How long one call may take before its stage fails with KeyStoreException. Default 5 s. */
    public Builder timeout(Duration timeout) {
      if (timeout == null || timeout.toMillis() < 1) {
        throw new IllegalArgumentException("timeout must be at least 1 ms, got " + timeout);
      }
      this.timeout = timeout;
      return this;
    }

    /** The largest response a completion may store. Default 64 KiB, at most 16 MiB. */
    public Builder maxResponseBytes(int max) {
      if (max < 0 || max > MAX_RESPONSE_BYTES_LIMIT) {
        throw new IllegalArgumentException(
            "maxResponseBytes must be in [0, " + MAX_RESPONSE_BYTES_LIMIT + "], got " + max);
      }
      this.maxResponseBytes = max;
      return this;
    }

    /**
     * The most calls one script carries when calls wait for the script in flight (see the class's
     * "Batches"). 1: every call is a script of its own, sent at once, however many are in flight.
     * Default {@value #DEFAULT_MAX_BATCH}, at most {@value #MAX_BATCH_LIMIT}.
     */
    public Builder maxBatch(int max) {
      if (max < 1 || max > MAX_BATCH_LIMIT) {
        throw new IllegalArgumentException(
            "maxBatch must be in [1, " + MAX_BATCH_LIMIT + "], got " + max);
      }
      this.maxBatch = max;
      return this;
    }

    /** Where stages complete; default Lettuce's I/O threads. */
    public Builder completionExecutor(Executor executor) {
      if (executor == null) {
        throw new IllegalArgumentException("completionExecutor must not be null");
      }
      this.completionExecutor = executor;
      return this;
    }

    /**
     * Connects (this blocks up to the timeout), checks that Redis can keep an acknowledged write
     * (see {@link #requireDurability}) and returns the store.
     *
     * @throws IllegalArgumentException if not exactly one of a client, a URI, a cluster client and
     *     cluster URIs was given, or the WAIT timeout is not shorter than the timeout
     * @throws KeyStoreException if Redis cannot be reached, or it cannot keep an acknowledged write
     *     and {@link #requireDurability} is set
     */
    public RedisKeyStore build() {
      int given =
          (client == null ? 0 : 1)
              + (uri == null ? 0 : 1)
              + (clusterClient == null ? 0 : 1)
              + (clusterUris == null ? 0 : 1);
      if (given != 1) {
        throw new IllegalArgumentException(
            "give exactly one of client(...), uri(...), clusterClient(...) and clusterUri(...)");
      }
      if (waitReplicas > 0 && waitTimeout.compareTo(timeout) >= 0) {
        throw new IllegalArgumentException(
            "the WAIT timeout " + waitTimeout + " must be shorter than the timeout " + timeout);
      }
      return clusterClient != null || clusterUris != null ? buildCluster() : buildSingle();
    }

    private RedisKeyStore buildSingle() {
      RedisClient owned = client == null ? ownedClient() : null;
      StatefulRedisConnection<byte[], byte[]> c = null;
      try {
        c =
            (owned != null ? owned : Objects.requireNonNull(client, "client or uri"))
                .connect(ByteArrayCodec.INSTANCE);
        checkDurability(List.of(DurabilityProbe.probe("redis", c.sync())));
        ReplicaWait after =
            waitReplicas > 0 ? ReplicaWait.single(waitReplicas, waitTimeout, c.async()) : null;
        return new RedisKeyStore(this, owned, c, c.async(), after);
      } catch (RuntimeException e) {
        throw failed(e, c, owned);
      }
    }

    private RedisKeyStore buildCluster() {
      RedisClusterClient owned = clusterClient == null ? ownedClusterClient() : null;
      StatefulRedisClusterConnection<byte[], byte[]> c = null;
      try {
        c =
            (owned != null ? owned : Objects.requireNonNull(clusterClient, "cluster client"))
                .connect(ByteArrayCodec.INSTANCE);
        List<DurabilityProbe.Finding> findings = new ArrayList<>();
        for (RedisClusterNode node : c.getPartitions()) {
          if (node.is(RedisClusterNode.NodeFlag.UPSTREAM) && !node.getSlots().isEmpty()) {
            findings.add(
                DurabilityProbe.probe(
                    "master " + node.getUri().getHost() + ":" + node.getUri().getPort(),
                    c.getConnection(node.getNodeId()).sync()));
          }
        }
        checkDurability(findings);
        // The connection to the namespace's master opens now: Lettuce opens a node's connection
        // at its first command, and with REJECT_COMMANDS that first command can fail while the
        // connection is still being set up.
        RedisClusterNode home =
            c.getPartitions()
                .getMasterBySlot(SlotHash.getSlot(("{" + prefix + "}").getBytes(UTF_8)));
        if (home != null) {
          c.getConnection(home.getUri().getHost(), home.getUri().getPort());
        }
        ReplicaWait after =
            waitReplicas > 0 ? ReplicaWait.cluster(waitReplicas, waitTimeout, c) : null;
        return new RedisKeyStore(this, owned, c, c.async(), after);
      } catch (RuntimeException e) {
        throw failed(e, c, owned);
      }
    }

    private void checkDurability(List<DurabilityProbe.Finding> findings) {
      List<String> volatileNodes = new ArrayList<>();
      List<String> unknown = new ArrayList<>();
      for (DurabilityProbe.Finding f : findings) {
        if (f.isVolatile()) {
          volatileNodes.add(f.describe());
        } else if (!f.durable()) {
          unknown.add(f.describe());
        }
      }
      if (!volatileNodes.isEmpty()) {
        String message =
            "Redis cannot keep an acknowledged write through a crash (no AOF, no replica): "
                + String.join("; ", volatileNodes)
                + ". A kill -9 loses the completions since the last snapshot, and their retries"
                + " run the business step again (docs/KEYS.md, \"Redis store\")";
        if (requireDurability) {
          throw new KeyStoreException(null, message + "; refused (requireDurability)", null);
        }
        LOG.log(System.Logger.Level.WARNING, message);
      }
      if (!unknown.isEmpty()) {
        LOG.log(
            System.Logger.Level.WARNING,
            "cannot tell whether Redis keeps an acknowledged write through a crash: "
                + String.join("; ", unknown));
      }
    }

    private static KeyStoreException failed(
        RuntimeException e,
        @Nullable StatefulConnection<byte[], byte[]> c,
        @Nullable AbstractRedisClient owned) {
      if (c != null) {
        c.close();
      }
      if (owned != null) {
        owned.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
      if (e instanceof KeyStoreException k) {
        return k;
      }
      return new KeyStoreException(null, "cannot connect to Redis: " + e.getMessage(), e);
    }

    // Lettuce 7 marks the adaptive-trigger setters deprecated with no replacement in this builder;
    // adaptive refresh on MOVED, ASK and reconnects is what finds a failover without waiting.
    @SuppressWarnings("deprecation")
    private RedisClusterClient ownedClusterClient() {
      List<RedisURI> seeds = new ArrayList<>();
      for (RedisURI u : Objects.requireNonNull(clusterUris, "cluster URIs")) {
        seeds.add(RedisURI.builder(u).withTimeout(timeout).build());
      }
      RedisClusterClient c = RedisClusterClient.create(seeds);
      c.setOptions(
          ClusterClientOptions.builder()
              .autoReconnect(true)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .socketOptions(SocketOptions.builder().connectTimeout(timeout).build())
              .timeoutOptions(TimeoutOptions.enabled(timeout))
              .topologyRefreshOptions(
                  ClusterTopologyRefreshOptions.builder()
                      .enablePeriodicRefresh(CLUSTER_TOPOLOGY_REFRESH)
                      .enableAdaptiveRefreshTrigger(
                          ClusterTopologyRefreshOptions.RefreshTrigger.MOVED_REDIRECT,
                          ClusterTopologyRefreshOptions.RefreshTrigger.ASK_REDIRECT,
                          ClusterTopologyRefreshOptions.RefreshTrigger.PERSISTENT_RECONNECTS,
                          ClusterTopologyRefreshOptions.RefreshTrigger.UNCOVERED_SLOT,
                          ClusterTopologyRefreshOptions.RefreshTrigger.UNKNOWN_NODE)
                      .adaptiveRefreshTriggersTimeout(Duration.ofMillis(500))
                      .refreshTriggersReconnectAttempts(1)
                      .build())
              .build());
      return c;
    }

    private RedisClient ownedClient() {
      RedisURI u = RedisURI.builder(uri).withTimeout(timeout).build();
      RedisClient c = RedisClient.create(u);
      c.setOptions(
          ClientOptions.builder()
              .autoReconnect(true)
              .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
              .socketOptions(SocketOptions.builder().connectTimeout(timeout).build())
              .timeoutOptions(TimeoutOptions.enabled(timeout))
              .build());
      return c;
    }
  }
}
