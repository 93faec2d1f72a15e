package io.idem.examples.payments;

import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotentRequest;
import io.idem.keys.IdempotencyKey;
import io.idem.keys.redis.RedisEffect;
import io.idem.keys.redis.RedisKeyRecord;
import io.idem.keys.redis.RedisKeyStore;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Balances in Redis, one integer per account at {@code {prefix}:balance/<account>} (in the key
 * store's namespace, so that a completion's script may write it), keys in the Redis store. The
 * keyed debit is an {@code INCRBY} inside the completion's script ({@link RedisEffect}); the plain
 * one is an {@code INCRBY} of its own. One shared Lettuce connection for the balances.
 */
final class RedisBalances implements Balances {
  /** How long one balance command may take. */
  static final Duration TIMEOUT = Duration.ofSeconds(5);

  private final RedisKeyStore keys;
  private final RedisClient client;
  private final StatefulRedisConnection<String, String> connection;
  private final RedisCommands<String, String> redis;

  private RedisBalances(
      RedisKeyStore keys, RedisClient client, StatefulRedisConnection<String, String> connection) {
    this.keys = keys;
    this.client = client;
    this.connection = connection;
    this.redis = connection.sync();
  }

  /**
   * Connects to {@code uri} twice: the key store's connection and the balances'.
   *
   * @throws IllegalArgumentException if {@code uri} is not a Redis URI or the prefix is bad
   * @throws io.idem.keys.KeyStoreException if Redis cannot be reached
   */
  static RedisBalances connect(String uri, String prefix) {
    RedisKeyStore keys = RedisKeyStore.builder().uri(uri).prefix(prefix).timeout(TIMEOUT).build();
    RedisClient client = null;
    try {
      client =
          RedisClient.create(RedisURI.builder(RedisURI.create(uri)).withTimeout(TIMEOUT).build());
      return new RedisBalances(keys, client, client.connect());
    } catch (RuntimeException e) {
      if (client != null) {
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
      keys.close();
      throw e;
    }
  }

  /** The Redis key of {@code account}'s balance. */
  String balanceKey(String account) {
    return keys.hashTag() + ":balance/" + account;
  }

  @Override
  public PaymentsService.Store store() {
    return PaymentsService.Store.REDIS;
  }

  @Override
  public IdempotencyFilter.Builder filter() {
    return IdempotencyFilter.builder(keys);
  }

  @Override
  public void open(String account, long balance) {
    redis.set(balanceKey(account), Long.toString(balance), SetArgs.Builder.nx());
  }

  @Override
  public Optional<Long> balance(Optional<IdempotentRequest> keyed, String account) {
    return Optional.ofNullable(redis.get(balanceKey(account))).map(Long::parseLong);
  }

  @Override
  public void debit(String account, long amount) {
    redis.incrby(balanceKey(account), -amount);
  }

  @Override
  public void debit(IdempotentRequest keyed, String account, long amount) {
    keyed.completeWith(RedisEffect.incrementBy(balanceKey(account), -amount));
  }

  @Override
  public Optional<byte[]> storedResponse(IdempotencyKey key) {
    Optional<RedisKeyRecord> record;
    try {
      record = keys.show(key).toCompletableFuture().get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted reading " + key, e);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException("cannot read " + key + ": " + e.getMessage(), e);
    }
    return record
        .filter(RedisKeyRecord::completed)
        .flatMap(r -> Withdrawals.executorResult(r.response()));
  }

  @Override
  public void close() {
    try {
      connection.close();
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    } finally {
      keys.close();
    }
  }
}
