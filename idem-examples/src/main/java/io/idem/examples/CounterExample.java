package io.idem.examples;

import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * A small client program: pipelines {@code count} exactly-once increments of a counter, then reads
 * it back. Kill the leader while it runs and it carries on.
 *
 * <pre>
 * java -jar idem-examples/target/idem-examples.jar 127.0.0.1:7001,127.0.0.1:7011,127.0.0.1:7021 visits 10000
 * </pre>
 */
public final class CounterExample {
  private CounterExample() {}

  /** Arguments: servers (comma-separated host:port), key, count. */
  public static void main(String[] args) throws Exception {
    if (args.length != 3) {
      System.err.println("usage: CounterExample <host:port,...> <key> <count>");
      System.exit(2);
    }
    int count;
    try {
      count = Integer.parseInt(args[2]);
    } catch (NumberFormatException e) {
      System.err.println("count must be a number, got \"" + args[2] + "\"");
      System.exit(2);
      return;
    }
    try (IdemClient client =
        IdemClient.builder().servers(args[0]).requestTimeout(Duration.ofSeconds(60)).build()) {
      long start = client.get(args[1]).map(kv -> Long.parseLong(kv.valueAsString())).orElse(0L);
      List<CompletableFuture<Long>> calls = new ArrayList<>(count);
      long t0 = System.nanoTime();
      for (int i = 0; i < count; i++) {
        calls.add(client.incrementAsync(args[1], 1));
      }
      for (CompletableFuture<Long> c : calls) {
        c.join();
      }
      double seconds = (System.nanoTime() - t0) / 1e9;
      String now = client.get(args[1]).orElseThrow().valueAsString();
      System.out.printf(
          "%s: %d -> %s after %d increments in %.2f s (%d retries, %d duplicates suppressed)%n",
          args[1], start, now, count, seconds, client.retries(), client.duplicatesSeen());
      if (Long.parseLong(now) < start + count) {
        System.err.println("fewer increments than sent: is another writer decrementing?");
        System.exit(1);
      }
    } catch (IdemException | IllegalArgumentException e) {
      System.err.println("error: " + e.getMessage());
      System.exit(1);
    } catch (CompletionException e) {
      System.err.println("error: " + e.getCause().getMessage());
      System.exit(1);
    }
  }
}
