package io.idem.verify;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.NotSentException;
import io.idem.client.OutcomeUnknownException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * The campaign's in-process clients, each on a thread of its own until the end of the run:
 * appending to lists and incrementing counters ({@link PipelinedClient}), registers ({@link
 * RegisterClient}) and leases ({@link LeaseClient}). What they share: their key spaces, a client's
 * lives ({@link Life}), the history every operation is recorded in, and the final reads of the
 * lists and counters.
 */
final class Workloads implements AutoCloseable {
  static final int LISTS = 8;
  static final int COUNTERS = 2;

  final Campaign.Settings settings;

  /** When the clients stop (System.nanoTime). */
  final long end;

  /** The negative control's resends, off the clients' I/O threads. */
  final ExecutorService resender = Executors.newSingleThreadExecutor();

  private final ClusterWatch watch;
  private final long t0;
  private final List<Op> history = Collections.synchronizedList(new ArrayList<>());
  private final AtomicLong ids = new AtomicLong();
  private final AtomicLong retries = new AtomicLong();
  private final List<Thread> threads = new ArrayList<>();

  /** Workload threads that died of an exception: the run cannot be judged. */
  private final Map<String, Throwable> crashed = new ConcurrentHashMap<>();

  /**
   * The settings' clients, not started yet.
   *
   * @param t0 the campaign's time origin (System.nanoTime): operations' times are relative to it
   * @param end when the clients stop (System.nanoTime)
   */
  Workloads(Campaign.Settings settings, ClusterWatch watch, long t0, long end) {
    this.settings = settings;
    this.watch = watch;
    this.t0 = t0;
    this.end = end;
  }

  /**
   * Starts the settings' clients, numbered in this order: appending, incrementing, register and
   * lease clients.
   */
  void start() {
    int c = 0;
    for (int i = 0; i < settings.appendClients(); i++, c++) {
      int id = c;
      thread("append-" + id, new PipelinedClient(this, id, true));
    }
    for (int i = 0; i < settings.counterClients(); i++, c++) {
      int id = c;
      thread("incr-" + id, new PipelinedClient(this, id, false));
    }
    for (int i = 0; i < settings.registerClients(); i++, c++) {
      int id = c;
      thread("register-" + id, new RegisterClient(this, id));
    }
    for (int i = 0; i < settings.leaseClients(); i++, c++) {
      int id = c;
      thread("lease-" + id, new LeaseClient(this, id));
    }
  }

  private void thread(String name, Runnable r) {
    Thread t = new Thread(r, name);
    t.setUncaughtExceptionHandler((th, e) -> crashed.put(th.getName(), e));
    t.start();
    threads.add(t);
  }

  /**
   * Waits until every client ended.
   *
   * @throws IllegalStateException if a client's thread died of an exception
   */
  void join() throws InterruptedException {
    for (Thread t : threads) {
      t.join();
    }
    if (!crashed.isEmpty()) {
      Map.Entry<String, Throwable> first = crashed.entrySet().iterator().next();
      throw new IllegalStateException(
          crashed.size()
              + " workload thread(s) died, the run cannot be judged; "
              + first.getKey()
              + ": "
              + first.getValue(),
          first.getValue());
    }
  }

  /** The operations recorded so far. */
  List<Op> history() {
    synchronized (history) {
      return new ArrayList<>(history);
    }
  }

  /** The calls the clients resent, summed over every client retired so far. */
  long retries() {
    return retries.get();
  }

  /** Reads the lists and counters (linearizably, with a 60 s timeout). */
  History.FinalState readFinalState() {
    Map<String, List<Long>> lists = new HashMap<>();
    Map<String, Long> counters = new HashMap<>();
    try (IdemClient reader = watch.client(Duration.ofSeconds(60))) {
      for (int k = 0; k < LISTS; k++) {
        String key = "list/" + k;
        List<Long> elements = new ArrayList<>();
        reader
            .get(key)
            .map(KeyValue::elements)
            .ifPresent(
                es ->
                    es.forEach(
                        b -> elements.add(Long.parseLong(new String(b, StandardCharsets.UTF_8)))));
        lists.put(key, elements);
      }
      for (int k = 0; k < COUNTERS; k++) {
        String key = "counter/" + k;
        counters.put(key, reader.get(key).map(kv -> Long.parseLong(kv.valueAsString())).orElse(0L));
      }
    }
    return new History.FinalState(lists, counters);
  }

  @Override
  public void close() {
    resender.shutdownNow();
  }

  private IdemClient client() {
    return watch.client(settings.atLeastOnce() ? Duration.ofMillis(300) : Duration.ofSeconds(20));
  }

  /**
   * A new client, tried again until the run ends while the cluster does not register it (a cluster
   * of several groups registers a client in its metadata group before {@code build()} returns), as
   * a restarted application keeps trying; null if the run ended first.
   */
  private @Nullable IdemClient clientUntilEnd() {
    while (true) {
      try {
        return client();
      } catch (NotSentException e) {
        System.err.println("workload: a new client was not registered, trying again: " + e);
        if (System.nanoTime() - end > 0) {
          return null;
        }
      }
    }
  }

  private void retire(IdemClient c) {
    retries.addAndGet(c.retries());
    c.close();
  }

  /**
   * One workload client's current {@link IdemClient}. When its session is lost (an unknown outcome
   * that is not a timeout), it is replaced by a new client, a new session under a new process name
   * ({@code c3}, then {@code c3.2}, ...), as a restarted application would be.
   */
  final class Life implements AutoCloseable {
    private final int id;
    private IdemClient client = firstClient();
    private int n = 1;

    Life(int id) {
      this.id = id;
    }

    IdemClient current() {
      return client;
    }

    String process() {
      return "c" + id + (n == 1 ? "" : "." + n);
    }

    /** After a failure: a timeout keeps the session, anything else starts a new life. */
    void after(Throwable failure) {
      if (!deadlinePassed(failure)) {
        renew();
      }
    }

    /**
     * Retires the current client for a new one. If the run ends before one registers, the retired
     * client stays current: its calls fail as the client's own, closed, and the run is over.
     */
    void renew() {
      retire(client);
      IdemClient next = clientUntilEnd();
      if (next != null) {
        client = next;
        n++;
      }
    }

    @Override
    public void close() {
      retire(client);
    }
  }

  private IdemClient firstClient() {
    IdemClient c = clientUntilEnd();
    return c != null ? c : client();
  }

  /**
   * Client {@code id}'s own random choices, seeded by the run's seed (a replay makes them again).
   */
  Random random(int id) {
    return new Random(settings.seed() * 31 + id);
  }

  /** A new life for client {@code id}: its first client and session. */
  Life life(int id) {
    return new Life(id);
  }

  static Throwable unwrap(Throwable e) {
    return e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
  }

  /**
   * Whether {@code failure} is a call's deadline passing (sent or not): the session goes on, and a
   * call that was sent is still resent by it.
   */
  static boolean deadlinePassed(Throwable failure) {
    return failure instanceof OutcomeUnknownException
        || (failure instanceof NotSentException n
            && n.reason() == NotSentException.Reason.DEADLINE);
  }

  /** Records a call that is not part of a pipeline (sequence number 0). */
  void record(
      String process,
      Op.Fn f,
      String key,
      long value,
      long expected,
      long start,
      Op.Outcome o,
      Long result) {
    record(process, f, key, value, expected, 0, start, o, result);
  }

  /**
   * Records a call that ended now ({@code o} OK or FAIL), or whose outcome is unknown ({@code o}
   * INFO: it may take effect until the end of time).
   */
  void record(
      String process,
      Op.Fn f,
      String key,
      long value,
      long expected,
      long seq,
      long start,
      Op.Outcome o,
      Long result) {
    history.add(
        new Op(
            ids.incrementAndGet(),
            process,
            f,
            key,
            value,
            expected,
            seq,
            start,
            o == Op.Outcome.INFO ? Long.MAX_VALUE : now(),
            o,
            result));
  }

  /** Nanoseconds since the campaign's time origin. */
  long now() {
    return System.nanoTime() - t0;
  }
}
