package io.idem.lab;

import io.idem.verify.KafkaReceiverBench;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem bench-kafka}: records per second through one exactly-once consumer on Idem and on
 * PostgreSQL, beside a hand-rolled PostgreSQL inbox consumer, in one sitting ({@link
 * KafkaReceiverBench}). Prints each run, then each store's median and its ratio to the inbox's.
 */
@Command(
    name = "bench-kafka",
    mixinStandardHelpOptions = true,
    description =
        "Measures records/s through the exactly-once Kafka receiver on Idem (3 server processes)"
            + " and on PostgreSQL, and through a hand-rolled PostgreSQL inbox consumer, on a real"
            + " broker, alternating the stores round by round.")
final class BenchKafkaCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--records",
      defaultValue = "100000",
      description = "Records in the topic; each run reads them all. Default: ${DEFAULT-VALUE}.")
  int records;

  @Option(
      names = "--partitions",
      defaultValue = "6",
      description = "The topic's partitions. Default: ${DEFAULT-VALUE}.")
  int partitions;

  @Option(
      names = "--accounts",
      defaultValue = "100",
      description = "Accounts the records credit. Default: ${DEFAULT-VALUE}.")
  int accounts;

  @Option(
      names = "--rounds",
      defaultValue = "3",
      description = "How many times each store runs, alternating. Default: ${DEFAULT-VALUE}.")
  int rounds;

  @Option(
      names = "--stores",
      split = ",",
      defaultValue = "idem,postgres,inbox",
      description = "Which of idem, postgres, inbox. Default: ${DEFAULT-VALUE}.")
  List<String> stores;

  @Option(
      names = "--max-poll-records",
      defaultValue = "500",
      description = "The consumers' max.poll.records. Default: ${DEFAULT-VALUE}.")
  int maxPollRecords;

  @Option(
      names = "--dir",
      description = "Where the servers' data and logs go. Default: a new temporary directory.")
  Path dir;

  @Override
  public Integer call() throws Exception {
    KafkaReceiverBench.Settings s;
    try {
      s =
          new KafkaReceiverBench.Settings(
              records, partitions, accounts, rounds, stores, maxPollRecords);
    } catch (IllegalArgumentException e) {
      spec.commandLine().getErr().println("idem: " + e.getMessage());
      return 2;
    }
    Path where =
        dir != null ? Files.createDirectories(dir) : Files.createTempDirectory("idem-bench-kafka");
    var out = spec.commandLine().getOut();
    List<KafkaReceiverBench.Run> runs = KafkaReceiverBench.run(where, s, out);
    Map<String, Double> medians = new TreeMap<>();
    for (String store : s.stores()) {
      double[] rates =
          runs.stream()
              .filter(r -> r.store().equals(store))
              .mapToDouble(KafkaReceiverBench.Run::perSecond)
              .sorted()
              .toArray();
      medians.put(store, rates[rates.length / 2]);
    }
    Double inbox = medians.get("inbox");
    for (Map.Entry<String, Double> e : medians.entrySet()) {
      out.printf(
          "median %-9s %,10.0f records/s%s%n",
          e.getKey(),
          e.getValue(),
          inbox == null ? "" : String.format("  %.2fx the inbox", e.getValue() / inbox));
    }
    out.flush();
    return 0;
  }
}
