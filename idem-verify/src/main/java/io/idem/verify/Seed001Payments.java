package io.idem.verify;

import io.idem.verify.seed001.Seed001;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisURI;
import io.lettuce.core.TimeoutOptions;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.function.Supplier;

/**
 * The negative control of the keys campaign on Redis: seed 001's algorithm ({@link Seed001}) on the
 * same private redis-server and under the same faults as {@link RedisPayments}. A payment is the
 * seed's caller: {@code TryAcquire(pay-i, in-progress timeout)}; if true, the business step, then
 * the ledger entry as a command of its own ({@code RPUSH ledger:account}), then {@code
 * Confirm(pay-i)}. The checker must flag what that does: a payer paused past its deadline is taken
 * over and both pay; a Redis error answers true, so a payment retried around a restart of
 * redis-server pays again; a payer killed between its RPUSH and its Confirm is run again.
 *
 * <p>The seed answers false both for "done" and for "someone else is on it". Its caller, asked the
 * same payment again by the campaign's redeliveries, reads the id ({@code GET}: -1 is Confirmed) to
 * tell the two apart: a confirmed payment is answered (the seed keeps no response, so the answer is
 * {@link #CONFIRMED}), one in progress is asked again shortly, as on every store. The ledger entry
 * carries the paying process's id in place of a token: the seed has none.
 */
final class Seed001Payments implements PaymentStore {
  /** A worker's answer for a payment the seed says is Confirmed. */
  static final String CONFIRMED = "confirmed";

  @Override
  public String name() {
    return "seed001";
  }

  @Override
  public Capabilities capabilities() {
    return Capabilities.SEED_001;
  }

  @Override
  public Servers start(Path dir) {
    return RedisServers.start(dir.resolve("redis"));
  }

  @Override
  public PaymentBackend connect(String address, Writes writes, boolean settler) {
    if (writes != Writes.FENCED_COMPLETION) {
      throw new IllegalArgumentException("seed 001 makes its own writes, not " + writes);
    }
    Duration timeout = Duration.ofSeconds(settler ? 30 : 2);
    RedisClient client =
        RedisClient.create(RedisURI.builder(RedisURI.create(address)).withTimeout(timeout).build());
    client.setOptions(
        ClientOptions.builder()
            .autoReconnect(true)
            .disconnectedBehavior(ClientOptions.DisconnectedBehavior.REJECT_COMMANDS)
            .timeoutOptions(TimeoutOptions.enabled(timeout))
            .build());
    try {
      return new Backend(client, client.connect());
    } catch (RuntimeException e) {
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      throw new PaymentBackend.Unavailable("cannot connect to " + address, e);
    }
  }

  /** The ledger list of {@code account}. */
  static String ledgerKey(int account) {
    return "ledger:" + account;
  }

  /** The seed's caller over one connection. */
  private static final class Backend implements PaymentBackend {
    private final RedisClient client;
    private final StatefulRedisConnection<String, String> connection;
    private final Seed001 seed;
    private final long payer = ProcessHandle.current().pid();

    Backend(RedisClient client, StatefulRedisConnection<String, String> connection) {
      this.client = client;
      this.connection = connection;
      this.seed = new Seed001(connection);
    }

    private RedisCommands<String, String> redis() {
      return connection.sync();
    }

    @Override
    public Claim acquire(Payment p, Duration inProgress) {
      if (seed.tryAcquire(p.key(), inProgress.toMillis())) {
        return new Claim.Owned(0); // the seed has no token
      }
      String state = call(p, () -> redis().get(p.key()));
      return Seed001.CONFIRMED.equals(state) ? new Claim.Done(null) : new Claim.Busy();
    }

    @Override
    public Attempt pay(Payment p, long token) {
      call(p, () -> redis().rpush(ledgerKey(p.account()), p.entry(payer)));
      seed.confirm(p.key());
      return new Attempt.Paid(p.response(payer));
    }

    private static <T> T call(Payment p, Supplier<T> command) {
      try {
        return command.get();
      } catch (RedisException e) {
        throw new Unavailable("payment " + p.i() + ": " + e.getMessage(), e);
      }
    }

    @Override
    public List<String> ledger(int account) {
      return redis().lrange(ledgerKey(account), 0, -1);
    }

    @Override
    public Optional<KeyState> key(Payment p) {
      String v = redis().get(p.key());
      return v == null
          ? Optional.empty()
          : Optional.of(new KeyState(Seed001.CONFIRMED.equals(v), -1, null));
    }

    @Override
    public void close() {
      connection.close();
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }
}
