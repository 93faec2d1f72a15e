package io.idem.lab;

import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeySettlement;
import io.idem.client.Write;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Idem sessions, one client each, on one shared transport: the bench's operations as Idem writes
 * (put, incr, append, mixed) or as keyed operations (an acquire, then a complete).
 */
final class IdemTarget implements BenchTarget {
  /** The workloads that {@code mixed} takes turns at, one operation each. */
  private static final List<BenchCommand.Workload> MIXED =
      List.of(BenchCommand.Workload.put, BenchCommand.Workload.incr, BenchCommand.Workload.append);

  /** Where the get workload's keys live. */
  private static final String READ_PREFIX = "bench/";

  private final List<IdemClient> clients;
  private final BenchSettings settings;
  private final String run;
  private final byte[] value;

  /**
   * @param clients one per session; the caller closes them
   * @param run tells this run's keys from an earlier run's against the same cluster
   */
  IdemTarget(List<IdemClient> clients, BenchSettings settings, String run) {
    this.clients = clients;
    this.settings = settings;
    this.run = run;
    this.value = new byte[settings.valueSize()];
  }

  @Override
  public String name() {
    return "idem";
  }

  @Override
  public void prepare() {
    if (settings.workload() == BenchCommand.Workload.get) {
      for (int k = 0; k < BenchTarget.READ_KEYS; k++) {
        clients.get(0).put(READ_PREFIX + BenchTarget.readKey(k), value);
      }
    }
  }

  @Override
  public CompletableFuture<?> op(int session, long n) {
    IdemClient c = clients.get(session);
    BenchCommand.Workload w =
        settings.workload() == BenchCommand.Workload.mixed
            ? MIXED.get((int) (n % MIXED.size()))
            : settings.workload();
    return switch (w) {
      case put -> c.putAsync("bench/" + session + "/" + (n % 1000), value, null);
      case incr -> c.incrementAsync("bench/counter/" + session, 1);
      case append -> c.appendAsync("bench/list/" + (session % 16), value);
      case keys -> keyed(c, session, n, value);
      case get ->
          c.getAsync(READ_PREFIX + BenchTarget.readKey(n))
              .thenApply(
                  v ->
                      v.orElseThrow(
                          () ->
                              new IllegalStateException(
                                  "read of "
                                      + READ_PREFIX
                                      + BenchTarget.readKey(n)
                                      + " found no value")));
      case mixed -> throw new IllegalStateException("mixed is resolved above");
    };
  }

  /**
   * Acquires a key no one used before and completes it: one keyed operation. Any answer but
   * acquired, then settled, fails it, so that it counts as an error.
   */
  private CompletableFuture<?> keyed(IdemClient c, int session, long n, byte[] response) {
    String key = run + "-" + session + "-" + n;
    return c.acquireKeyAsync(
            BenchSettings.KEY_SCOPE,
            key,
            new byte[0],
            BenchSettings.KEY_IN_PROGRESS,
            settings.keyRetention())
        .thenCompose(
            a ->
                a instanceof KeyAcquisition.Acquired got
                    ? c.completeKeyAsync(
                        BenchSettings.KEY_SCOPE,
                        key,
                        got.token(),
                        response,
                        settings.ledger()
                            ? Write.append(
                                "bench/ledger/" + session, key.getBytes(StandardCharsets.UTF_8))
                            : null)
                    : CompletableFuture.failedFuture(
                        new IllegalStateException("acquire of a new key answered " + a)))
        .thenApply(
            s -> {
              if (!(s instanceof KeySettlement.Settled)) {
                throw new IllegalStateException("complete of an acquired key answered " + s);
              }
              return s;
            });
  }

  @Override
  public long retries() {
    return clients.stream().mapToLong(IdemClient::retries).sum();
  }

  @Override
  public long duplicates() {
    return clients.stream().mapToLong(IdemClient::duplicatesSeen).sum();
  }

  @Override
  public void close() {
    // the clients are closed by whoever built them
  }
}
