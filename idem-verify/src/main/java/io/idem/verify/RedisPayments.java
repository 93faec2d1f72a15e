package io.idem.verify;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.KeyStoreException;
import io.idem.keys.redis.RedisEffect;
import io.idem.keys.redis.RedisKeyStore;
import io.idem.keys.spi.Acquisition;
import io.idem.keys.spi.Settlement;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
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
 * <p>The checker reads Redis directly, by the layout docs/KEYS.md documents, not through the store:
 * the record {@code {payments}:k:8:payments:pay-i} (token {@code t}, response {@code v}) and the
 * ledger lists.
 */
final class RedisPayments implements PaymentStore {
  /** The store's namespace (and hash tag). */
  static final String PREFIX = "payments";

  @Override
  public String name() {
    return "redis";
  }

  @Override
  public boolean expectsViolations() {
    return false;
  }

  @Override
  public Servers start(Path dir) {
    return RedisServers.start(dir.resolve("redis"));
  }

  @Override
  public PaymentBackend connect(String address, boolean fenced, boolean settler) {
    if (!fenced) {
      throw new IllegalArgumentException(
          "the redis store has no unfenced mode; its negative control is the store seed001");
    }
    Duration timeout = Duration.ofSeconds(settler ? 30 : 2);
    RedisKeyStore store;
    try {
      store = RedisKeyStore.builder().uri(address).prefix(PREFIX).timeout(timeout).build();
    } catch (KeyStoreException e) {
      throw new PaymentBackend.Unavailable("cannot connect to " + address, e);
    }
    RedisClient reader = RedisClient.create(address);
    try {
      return new Backend(store, reader, reader.connect());
    } catch (RuntimeException e) {
      reader.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      store.close();
      throw new PaymentBackend.Unavailable("cannot connect to " + address, e);
    }
  }

  /** The ledger list of {@code account}, in the namespace. */
  static String ledgerKey(int account) {
    return "{" + PREFIX + "}:ledger:" + account;
  }

  /** Payments over a {@link RedisKeyStore}; reads for the checker over a connection of its own. */
  private static final class Backend implements PaymentBackend {
    private final RedisKeyStore store;
    private final RedisClient readerClient;
    private final StatefulRedisConnection<String, String> reader;

    Backend(
        RedisKeyStore store,
        RedisClient readerClient,
        StatefulRedisConnection<String, String> reader) {
      this.store = store;
      this.readerClient = readerClient;
      this.reader = reader;
    }

    private static IdempotencyKey idempotencyKey(Payment p) {
      return new IdempotencyKey(IdemPayments.SCOPE, p.key());
    }

    @Override
    public Claim acquire(Payment p, Duration inProgress) {
      Acquisition a =
          join(
              p,
              store.acquire(
                  idempotencyKey(p),
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
    public String pay(Payment p, long token) {
      String response = p.response(token);
      RedisEffect ledger =
          RedisEffect.push(ledgerKey(p.account()), p.entry(token).getBytes(StandardCharsets.UTF_8));
      Settlement s =
          join(
              p,
              store.complete(
                  idempotencyKey(p), token, response.getBytes(StandardCharsets.UTF_8), ledger));
      return s instanceof Settlement.Fenced ? null : response;
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

    private RedisCommands<String, String> redis() {
      return reader.sync();
    }

    @Override
    public List<String> ledger(int account) {
      return read(() -> redis().lrange(ledgerKey(account), 0, -1));
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
      List<String> fields =
          read(
              () ->
                  redis().hmget(record, "t", "v").stream()
                      .map(v -> v.getValueOrElse(null))
                      .toList());
      if (fields.get(0) == null) {
        return Optional.empty();
      }
      return Optional.of(
          new KeyState(fields.get(1) != null, Long.parseLong(fields.get(0)), fields.get(1)));
    }

    private static <T> T read(Supplier<T> call) {
      try {
        return call.get();
      } catch (RedisException e) {
        throw new Unavailable("read: " + e.getMessage(), e);
      }
    }

    @Override
    public boolean hasTokens() {
      return true;
    }

    @Override
    public boolean keepsResponses() {
      return true;
    }

    @Override
    public Optional<Long> statusToken(long i) {
      return Optional.empty();
    }

    @Override
    public boolean writesStatus() {
      return false;
    }

    @Override
    public void close() {
      reader.close();
      readerClient.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      store.close();
    }
  }
}
