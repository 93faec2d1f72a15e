package io.idem.lab;

import io.idem.verify.seed001.Seed001;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Seed 001's algorithm ({@link Seed001}, the broken baseline) as a bench target ({@code idem bench
 * --workload keys --store seed001}), for the side-by-side comparison with the Redis store on the
 * same redis-server: one keyed operation is the seed's {@code TryAcquire} of an id no one used
 * before ({@code SET id deadline EX 86400 NX}) and its {@code Confirm} ({@code SET id -1 XX}), two
 * commands one after the other. A "session" is a connection of its own, over one {@link
 * RedisClient}, as for the store. The seed keeps no response, and its errors are invisible by
 * design (TryAcquire answers true, Confirm answers nothing), so only a false from TryAcquire counts
 * as an error here. With {@code ledger}, the business step's write goes between the two, as the
 * seed's caller does it: an {@code RPUSH} of the id to the session's ledger list, a command of its
 * own.
 */
final class Seed001Target implements BenchTarget {
  private final List<StatefulRedisConnection<String, String>> connections = new ArrayList<>();
  private final List<Seed001> seeds = new ArrayList<>();
  private final String run;
  private final long timeoutMs;
  private final boolean ledger;

  Seed001Target(RedisClient client, int sessions, String run, long timeoutMs, boolean ledger) {
    this.run = run;
    this.timeoutMs = timeoutMs;
    this.ledger = ledger;
    try {
      for (int i = 0; i < sessions; i++) {
        StatefulRedisConnection<String, String> c = client.connect();
        connections.add(c);
        seeds.add(new Seed001(c));
      }
    } catch (RuntimeException e) {
      close();
      throw e;
    }
  }

  @Override
  public String name() {
    return "seed001";
  }

  @Override
  public CompletableFuture<?> op(int session, long n) {
    Seed001 seed = seeds.get(session);
    String id = BenchSettings.KEY_SCOPE + ":" + run + "-" + session + "-" + n;
    return seed.tryAcquireAsync(id, timeoutMs)
        .thenCompose(
            acquired ->
                acquired
                    ? write(session, id).thenCompose(w -> seed.confirmAsync(id))
                    : CompletableFuture.failedFuture(
                        new IllegalStateException("TryAcquire of a new id answered false")));
  }

  /** The business write, when there is one: RPUSH to the session's ledger. */
  private CompletableFuture<?> write(int session, String id) {
    if (!ledger) {
      return CompletableFuture.completedFuture(null);
    }
    return connections
        .get(session)
        .async()
        .rpush(BenchSettings.KEY_SCOPE + ":ledger:" + session, id)
        .toCompletableFuture();
  }

  @Override
  public void close() {
    connections.forEach(StatefulRedisConnection::close); // the client stays the caller's
  }
}
