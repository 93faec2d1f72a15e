package io.idem.cli;

import io.idem.client.IdemClient;
import io.idem.testkit.LocalCluster;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code idem bench}: many sessions, each pipelining exactly-once writes, against {@code --servers}
 * or an in-process cluster ({@code --local N}). Prints throughput and latency percentiles
 * (HdrHistogram); the last line is JSON.
 */
@Command(
    name = "bench",
    mixinStandardHelpOptions = true,
    description = "Measures exactly-once write throughput and latency; the last line is JSON.")
final class BenchCommand implements Callable<Integer> {
  enum Workload {
    put,
    incr,
    append,
    mixed
  }

  @Option(
      names = "--servers",
      defaultValue = "${env:IDEM_SERVERS:-127.0.0.1:7001}",
      description =
          "Client addresses of the cluster. Ignored with --local. Default: ${DEFAULT-VALUE}.")
  String servers;

  @Option(
      names = "--local",
      defaultValue = "0",
      description = "Run an in-process cluster of this many nodes (1-5) instead.")
  int local;

  @Option(
      names = "--sessions",
      defaultValue = "64",
      description = "Concurrent sessions (clients). Default: ${DEFAULT-VALUE}.")
  int sessions;

  @Option(
      names = "--window",
      defaultValue = "32",
      description = "Writes in flight per session. Default: ${DEFAULT-VALUE}.")
  int window;

  @Option(
      names = "--workload",
      defaultValue = "put",
      description = "put, incr, append or mixed. Default: ${DEFAULT-VALUE}.")
  Workload workload;

  @Option(
      names = "--value-size",
      defaultValue = "100",
      description = "Bytes per value. Default: ${DEFAULT-VALUE}.")
  int valueSize;

  @Option(
      names = "--duration",
      defaultValue = "10s",
      converter = DurationConverter.class,
      description = "How long to measure. Default: ${DEFAULT-VALUE}.")
  Duration duration;

  @Override
  public Integer call() throws Exception {
    if (sessions < 1
        || sessions > 10_000
        || window < 1
        || window > 4096
        || valueSize < 0
        || valueSize > 1024 * 1024
        || local < 0
        || local > 5) {
      System.err.println(
          "idem: out of range: --sessions 1-10000, --window 1-4096, --value-size 0-1048576, --local 0-5");
      return 2;
    }
    if (local == 0) {
      return run(servers);
    }
    Path dir = Files.createTempDirectory("idem-bench");
    try (LocalCluster cluster = LocalCluster.start(local, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      return run(String.join(",", cluster.clientAddresses()));
    } finally {
      try (Stream<Path> files = Files.walk(dir)) {
        for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
          Files.deleteIfExists(p);
        }
      }
    }
  }

  private int run(String addresses) throws Exception {
    List<IdemClient> clients = new ArrayList<>();
    try {
      IdemClient probe =
          IdemClient.builder().servers(addresses).requestTimeout(Duration.ofSeconds(5)).build();
      clients.add(probe);
      probe.put("bench/probe", new byte[0]); // fails fast, in one line, if nobody answers
      for (int i = 1; i < sessions; i++) {
        clients.add(IdemClient.builder().servers(addresses).window(window).build());
      }
      return measure(clients);
    } finally {
      for (IdemClient c : clients) {
        c.close();
      }
    }
  }

  private int measure(List<IdemClient> clients) throws InterruptedException {
    byte[] value = new byte[valueSize];
    Recorder recorder = new Recorder(3);
    AtomicLong done = new AtomicLong();
    AtomicLong errors = new AtomicLong();
    Semaphore[] permits = new Semaphore[clients.size()];
    for (int i = 0; i < permits.length; i++) {
      permits[i] = new Semaphore(window);
    }
    long start = System.nanoTime();
    long end = start + duration.toNanos();
    long[] counters = new long[clients.size()];
    long nextTick = start + TimeUnit.SECONDS.toNanos(1);
    long lastDone = 0;
    while (System.nanoTime() < end) {
      boolean issued = false;
      for (int i = 0; i < clients.size(); i++) {
        while (permits[i].tryAcquire()) {
          issued = true;
          long n = counters[i]++;
          Semaphore p = permits[i];
          long t0 = System.nanoTime();
          op(clients.get(i), i, n, value)
              .whenComplete(
                  (r, e) -> {
                    if (e == null) {
                      recorder.recordValue(Math.max(1, (System.nanoTime() - t0) / 1_000));
                      done.incrementAndGet();
                    } else {
                      errors.incrementAndGet();
                    }
                    p.release();
                  });
        }
      }
      long now = System.nanoTime();
      if (now >= nextTick) {
        long d = done.get();
        progress(now - start, d - lastDone);
        lastDone = d;
        nextTick += TimeUnit.SECONDS.toNanos(1);
      }
      if (!issued) {
        Thread.sleep(1);
      }
    }
    long measuredNanos = System.nanoTime() - start;
    long ops = done.get();
    for (Semaphore p : permits) {
      p.tryAcquire(window, 30, TimeUnit.SECONDS); // let what is in flight finish
    }
    Histogram h = recorder.getIntervalHistogram();
    long retries = clients.stream().mapToLong(IdemClient::retries).sum();
    long duplicates = clients.stream().mapToLong(IdemClient::duplicatesSeen).sum();
    double seconds = measuredNanos / 1e9;
    double throughput = ops / seconds;
    System.out.println();
    System.out.printf(
        Locale.ROOT,
        "%s, %d sessions x window %d, %d-byte values, %.1f s: %.0f writes/s%n",
        workload,
        clients.size(),
        window,
        valueSize,
        seconds,
        throughput);
    System.out.printf(
        Locale.ROOT,
        "latency ms: p50 %.2f  p99 %.2f  p99.9 %.2f  max %.2f   retries %d  duplicates suppressed %d  errors %d%n",
        ms(h, 50),
        ms(h, 99),
        ms(h, 99.9),
        h.getMaxValue() / 1000.0,
        retries,
        duplicates,
        errors.get());
    System.out.printf(
        Locale.ROOT,
        "{\"target\":\"idem\",\"workload\":\"%s\",\"sessions\":%d,\"window\":%d,\"value_size\":%d,"
            + "\"seconds\":%.2f,\"ops\":%d,\"ops_per_s\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
            + "\"p999_ms\":%.3f,\"retries\":%d,\"duplicates\":%d,\"errors\":%d}%n",
        workload,
        clients.size(),
        window,
        valueSize,
        seconds,
        ops,
        throughput,
        ms(h, 50),
        ms(h, 99),
        ms(h, 99.9),
        retries,
        duplicates,
        errors.get());
    return errors.get() == 0 ? 0 : 1;
  }

  private CompletableFuture<?> op(IdemClient c, int session, long n, byte[] value) {
    Workload w = workload == Workload.mixed ? Workload.values()[(int) (n % 3)] : workload;
    return switch (w) {
      case put -> c.putAsync("bench/" + session + "/" + (n % 1000), value, null);
      case incr -> c.incrementAsync("bench/counter/" + session, 1);
      case append -> c.appendAsync("bench/list/" + (session % 16), value);
      case mixed -> throw new IllegalStateException("mixed is resolved above");
    };
  }

  private static double ms(Histogram h, double percentile) {
    return h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(percentile) / 1000.0;
  }

  private void progress(long elapsedNanos, long lastSecond) {
    int width = 30;
    double fraction = Math.min(1, elapsedNanos / (double) duration.toNanos());
    int filled = (int) (fraction * width);
    System.out.printf(
        Locale.ROOT,
        "\r[%s%s] %3.0f%%  %,d writes/s ",
        "#".repeat(filled),
        " ".repeat(width - filled),
        fraction * 100,
        lastSecond);
    System.out.flush();
  }
}
