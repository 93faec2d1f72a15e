package io.idem.lab;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem demo}: a 3-node cluster in this process, two pipelining clients, and the faults the
 * Idempotent Receiver exists for: lost responses, a killed leader, a client restarted from its
 * identity file. It then checks the final state against what the clients were told.
 */
@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    subcommands = {PaymentsDemoCommand.class},
    description =
        "Runs a 3-node cluster in process, drops responses, kills the leader, restarts a client from"
            + " its identity file, and checks that every acknowledged operation was applied exactly"
            + " once. 'idem demo payments' runs the HTTP payments example under faults.")
final class DemoCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--seconds",
      defaultValue = "20",
      description = "How long the clients run, 10 to 300. Default: ${DEFAULT-VALUE}.")
  int seconds;

  private final AtomicLong increments = new AtomicLong();
  private final AtomicLong incrementsUnknown = new AtomicLong();
  private final AtomicLong crashedInFlight = new AtomicLong();
  private volatile int counterGeneration;
  private final AtomicLong appends = new AtomicLong();
  private final Set<String> appendedValues = ConcurrentHashMap.newKeySet();
  private final AtomicLong appendsUnknown = new AtomicLong();
  private long started;

  @Override
  public Integer call() throws Exception {
    if (seconds < 10 || seconds > 300) {
      spec.commandLine().getErr().println("idem: --seconds must be in [10, 300], got " + seconds);
      return 2;
    }
    Path dir = Files.createTempDirectory("idem-demo");
    started = System.nanoTime();
    say("starting a 3-node cluster in " + dir);
    try (LocalCluster cluster =
        LocalCluster.start(3, dir.resolve("cluster"), b -> b.snapshotEveryEntries(2_000))) {
      int leader = cluster.waitForLeader(Duration.ofSeconds(30));
      say("leader is n" + (leader + 1) + "; clients start");
      return run(cluster, leader, dir);
    } finally {
      deleteTree(dir);
    }
  }

  @SuppressWarnings("NonAtomicVolatileUpdate") // this loop is counterGeneration's only writer
  private int run(LocalCluster cluster, int leader, Path dir) throws Exception {
    FaultProxy proxy = FaultProxy.start(cluster.clientAddress(leader));
    List<String> viaProxy = new ArrayList<>();
    viaProxy.add(proxy.address());
    for (int i = 0; i < cluster.size(); i++) {
      if (i != leader) {
        viaProxy.add(cluster.clientAddress(i));
      }
    }
    Path identity = dir.resolve("counter-worker.id");
    IdemClient appender =
        IdemClient.builder().servers(viaProxy).stallTimeout(Duration.ofSeconds(1)).build();
    IdemClient[] counter = {counterClient(cluster, identity)};
    Semaphore appendPermits = new Semaphore(128);
    Semaphore incrementPermits = new Semaphore(128);
    long clientsStarted = System.nanoTime();
    long end = clientsStarted + TimeUnit.SECONDS.toNanos(seconds);
    long nextReport = 0;
    int phase = 0;
    long appendSeq = 0;
    long retriesBefore = 0;
    while (System.nanoTime() < end) {
      long t = elapsedSeconds();
      // The fault schedule, in fractions of the clients' run (the cluster's start-up excluded).
      double c = (System.nanoTime() - clientsStarted) / 1e9;
      if (phase == 0 && c >= seconds * 0.15) {
        say("fault: the network swallows every response from n" + (leader + 1) + " for 1.5 s");
        proxy.blackholeResponses();
        phase++;
      } else if (phase == 1 && c >= seconds * 0.15 + 1.5) {
        proxy.passResponses();
        proxy.resetConnections();
        say("fault: connections reset; clients resend what had no answer, with the same numbers");
        phase++;
      } else if (phase == 2 && c >= seconds * 0.35) {
        int current = cluster.waitForLeader(Duration.ofSeconds(30));
        say("fault: killing the leader n" + (current + 1));
        cluster.kill(current);
        leader = current;
        phase++;
      } else if (phase == 3 && c >= seconds * 0.55) {
        cluster.restart(leader);
        say("n" + (leader + 1) + " restarted; it catches up from its snapshot and log");
        phase++;
      } else if (phase == 4 && c >= seconds * 0.7) {
        say("fault: the counter client crashes and restarts from its identity file");
        // Its calls in flight die with it (the process is gone); their requests are in the journal.
        counterGeneration++;
        counter[0].close();
        counter[0] = counterClient(cluster, identity);
        List<IdemClient.RecoveredCall> recovered = counter[0].recovered();
        say(
            "restarted counter client resumed its session (epoch bump) and resends "
                + recovered.size()
                + " requests");
        for (IdemClient.RecoveredCall r : recovered) {
          r.result().whenComplete((v, e) -> count(e, increments, incrementsUnknown));
        }
        phase++;
      }
      // Keep both clients' pipelines full.
      while (appendPermits.tryAcquire()) {
        String value = "a-" + appendSeq++;
        appender
            .appendAsync("demo/list", value.getBytes(StandardCharsets.UTF_8))
            .whenComplete(
                (v, e) -> {
                  if (e == null) {
                    appendedValues.add(value);
                  }
                  count(e, appends, appendsUnknown);
                  appendPermits.release();
                });
      }
      while (incrementPermits.tryAcquire()) {
        int generation = counterGeneration;
        counter[0]
            .incrementAsync("demo/counter", 1)
            .whenComplete(
                (v, e) -> {
                  if (e != null && generation != counterGeneration) {
                    crashedInFlight
                        .incrementAndGet(); // resent by the restarted client, or never sent
                  } else {
                    count(e, increments, incrementsUnknown);
                  }
                  incrementPermits.release();
                });
      }
      if (t >= nextReport) {
        long retries = appender.retries() + counter[0].retries();
        System.out.printf(
            "  %3ds  increments acknowledged %7d   appends acknowledged %7d   retries %4d%n",
            t, increments.get(), appends.get(), Math.max(retries, retriesBefore));
        retriesBefore = Math.max(retries, retriesBefore);
        nextReport = t + 2;
      }
      Thread.sleep(5);
    }
    say("stopping clients; waiting for every answer");
    incrementPermits.acquire(128);
    appendPermits.acquire(128);
    long retries = appender.retries() + counter[0].retries() + retriesBefore;
    appender.close();
    counter[0].close();
    proxy.close();
    return verify(cluster, retries);
  }

  private static IdemClient counterClient(LocalCluster cluster, Path identity) {
    return IdemClient.builder()
        .servers(cluster.clientAddresses())
        .stallTimeout(Duration.ofSeconds(1))
        .identity(identity, "counter-worker")
        .build();
  }

  private static void count(Throwable e, AtomicLong ok, AtomicLong unknown) {
    if (e == null) {
      ok.incrementAndGet();
    } else {
      unknown.incrementAndGet();
    }
  }

  private int verify(LocalCluster cluster, long retries) {
    int leader = cluster.waitForLeader(Duration.ofSeconds(30));
    String digest = cluster.awaitEqualDigests(Duration.ofSeconds(30));
    long duplicates = cluster.node(leader).status().getDuplicatesSuppressed();
    try (IdemClient reader = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
      long counter =
          reader.get("demo/counter").map(kv -> Long.parseLong(kv.valueAsString())).orElse(0L);
      KeyValue list = reader.get("demo/list").orElseThrow();
      Map<String, Integer> seen = new HashMap<>();
      for (byte[] e : list.elements()) {
        seen.merge(new String(e, StandardCharsets.UTF_8), 1, Integer::sum);
      }
      long twice = seen.values().stream().filter(n -> n > 1).count();
      long missing = appendedValues.stream().filter(v -> !seen.containsKey(v)).count();
      long unknownIncrements = incrementsUnknown.get();
      // Calls cut off by the crash were either journaled (then resent and counted when the
      // restarted
      // client got their answers) or never sent. So the counter must equal the acknowledged
      // increments, give or take those whose outcome stayed unknown.
      boolean counterOk =
          counter >= increments.get() && counter <= increments.get() + unknownIncrements;
      boolean listOk = twice == 0 && missing == 0;
      System.out.println();
      System.out.println("report");
      System.out.printf(
          "  increments acknowledged      %8d   counter on the cluster %d%n",
          increments.get(), counter);
      System.out.printf(
          "  increments cut off by the crash %5d   (journaled ones were resent; their answers are counted above)%n",
          crashedInFlight.get());
      System.out.printf("  increments with unknown outcome %5d%n", unknownIncrements);
      System.out.printf(
          "  appends acknowledged         %8d   list length %d, values applied twice %d, acknowledged but missing %d%n",
          appends.get(), list.elements().size(), twice, missing);
      System.out.printf("  client retries               %8d%n", retries);
      System.out.printf(
          "  duplicates suppressed        %8d   (retries answered from saved responses)%n",
          duplicates);
      System.out.printf(
          "  replica digests equal           yes   (%s...)%n", digest.substring(0, 12));
      boolean pass = counterOk && listOk;
      System.out.println(
          pass
              ? "verdict: PASS: every acknowledged operation was applied exactly once"
              : "verdict: FAIL: the final state does not match what the clients were told");
      return pass ? 0 : 1;
    }
  }

  private long elapsedSeconds() {
    return TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started);
  }

  private void say(String what) {
    System.out.printf("[%3ds] %s%n", elapsedSeconds(), what);
  }

  private void deleteTree(Path dir) {
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    } catch (java.io.IOException e) {
      spec.commandLine().getErr().println("idem: could not remove " + dir + ": " + e.getMessage());
    }
  }
}
