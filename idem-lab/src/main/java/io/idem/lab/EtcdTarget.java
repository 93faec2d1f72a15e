package io.idem.lab;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KV;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * etcd as a bench target, for the side-by-side comparison: the same closed loops, as plain puts
 * through one jetcd client (thread-safe; it multiplexes all calls over one connection per
 * endpoint). etcd has no sessions, so a "session" is only a key range here, and a put whose answer
 * is lost cannot be retried without risking a second write: jetcd's retries stay off.
 */
final class EtcdTarget implements BenchTarget {
  private static final long CALL_TIMEOUT_S = 30;

  private final Client client;
  private final KV kv;
  private final ByteSequence value;
  private final boolean reads;

  private EtcdTarget(Client client, int valueSize, boolean reads) {
    this.client = client;
    this.kv = client.getKVClient();
    this.value = ByteSequence.from(new byte[valueSize]);
    this.reads = reads;
  }

  /** A client for the comma-separated {@code host:port} client addresses of an etcd cluster. */
  static EtcdTarget connect(String servers, int valueSize, BenchCommand.Workload workload) {
    List<String> endpoints = new ArrayList<>();
    for (String s : servers.split(",")) {
      if (!s.isBlank()) {
        endpoints.add(s.contains("://") ? s.trim() : "http://" + s.trim());
      }
    }
    if (endpoints.isEmpty()) {
      throw new IllegalArgumentException("--servers names no etcd endpoint");
    }
    return new EtcdTarget(
        Client.builder().endpoints(endpoints.toArray(String[]::new)).build(),
        valueSize,
        workload == BenchCommand.Workload.get);
  }

  /** One put, waited for: a clear error now rather than a run of failures. */
  void probe() throws InterruptedException {
    try {
      kv.put(key("probe"), ByteSequence.EMPTY).get(5, TimeUnit.SECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw new IllegalStateException(
          "etcd did not answer a put within 5 s: "
              + (e.getCause() == null ? e.toString() : e.getCause().toString()),
          e);
    }
  }

  @Override
  public String name() {
    return "etcd";
  }

  @Override
  public void prepare() throws InterruptedException, ExecutionException, TimeoutException {
    if (reads) {
      for (int k = 0; k < READ_KEYS; k++) {
        kv.put(key(BenchTarget.readKey(k)), value).get(CALL_TIMEOUT_S, TimeUnit.SECONDS);
      }
    }
  }

  /**
   * A put of session's key {@code n mod 1000}, or with the get workload a linearizable get (etcd's
   * default; serializable reads stay off) that must find its key.
   */
  @Override
  public CompletableFuture<?> op(int session, long n) {
    if (reads) {
      ByteSequence k = key(BenchTarget.readKey(n));
      return kv.get(k)
          .thenApply(
              r -> {
                if (r.getCount() != 1) {
                  throw new IllegalStateException("read of " + k + " found no value");
                }
                return r;
              })
          .orTimeout(CALL_TIMEOUT_S, TimeUnit.SECONDS);
    }
    return kv.put(key(session + "/" + (n % 1000)), value)
        .orTimeout(CALL_TIMEOUT_S, TimeUnit.SECONDS);
  }

  private static ByteSequence key(String suffix) {
    return ByteSequence.from("bench/" + suffix, StandardCharsets.UTF_8);
  }

  @Override
  public void close() {
    kv.close();
    client.close();
  }
}
