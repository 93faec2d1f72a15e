package io.idem.lab;

import io.idem.cli.DurationConverter;
import io.idem.cli.Errors;
import io.idem.verify.Campaign;
import io.idem.verify.FailoverBench;
import io.idem.verify.KafkaCampaign;
import io.idem.verify.KeysCampaign;
import io.idem.verify.Violation;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code idem verify}: a fault campaign against real {@code idem server} processes, judged by the
 * history checkers (docs/VERIFICATION.md). Exit 0 when the verdict is as expected: no violations,
 * or, for the negative control, the duplicates it must cause were found.
 */
@Command(
    name = "verify",
    mixinStandardHelpOptions = true,
    description =
        "Runs a fault campaign against server processes (kill -9, SIGSTOP, wipes, lost responses,"
            + " resets, delays, client process kills, partitions between the servers) and checks the"
            + " history; or, with --check,"
            + " checks a recorded run again.")
final class VerifyCommand implements Callable<Integer> {
  @Spec CommandSpec spec;

  @Option(
      names = "--profile",
      defaultValue = "ci",
      description =
          "ci (150 s; 30 s with --negative-control) or long (30 minutes). Default: ${DEFAULT-VALUE}.")
  String profile;

  enum Workload {
    kv,
    keys,
    kafka
  }

  @Option(
      names = "--workload",
      defaultValue = "kv",
      description =
          "kv: lists, counters, registers and leases (the default); keys: payment workers on"
              + " idempotency keys (45 s ci, 30 min long) on the --store; with"
              + " --negative-control their writes on Idem are unfenced and the checker must flag"
              + " double payments; kafka: consumer processes apply payment records from a real"
              + " broker through the exactly-once receiver to a ledger on the --store (idem or"
              + " postgres; 40 s ci, 10 min long), under kills, pauses past max.poll.interval.ms,"
              + " rebalances, broker restarts and the store's faults; with --negative-control a"
              + " plain consumer committing Kafka's offsets after its batch, whose duplicates the"
              + " checker must flag. Default: ${DEFAULT-VALUE}.")
  Workload workload;

  @Option(
      names = "--store",
      defaultValue = "idem",
      description =
          "With --workload keys: idem (3 server processes; faults: lost responses, kill -9 of the"
              + " leader), redis (the Redis store on a private redis-server with appendfsync"
              + " always; fault: kill -9 and restart of redis-server), redis-cluster (the Redis"
              + " store with WAIT 1 on six private redis-server nodes, 3 masters and 3 replicas;"
              + " faults: kill -9 of the payments' master, CLUSTER FAILOVER, the slot resharded),"
              + " postgres (the PostgreSQL"
              + " store's transactional mode on a private PostgreSQL; fault: an immediate shutdown"
              + " and restart), or seed001 (seed 001's"
              + " algorithm on the same redis-server: the negative control, exit 0 only if the"
              + " checker flags its double payments). Workers are killed and paused on every"
              + " store. Default: ${DEFAULT-VALUE}.")
  String store;

  @Option(
      names = "--seed",
      description = "Seed of the fault schedule and workload. Default: random.")
  Long seed;

  @Option(
      names = "--duration",
      converter = DurationConverter.class,
      description = "How long the clients run, instead of the profile's.")
  Duration duration;

  @Option(
      names = "--negative-control",
      description =
          "Clients resend timed-out calls as new calls (at-least-once); the checkers must flag it.")
  boolean negativeControl;

  @Option(
      names = "--dir",
      description =
          "Where the servers' data, logs and history.jsonl go. Default: a new temporary directory.")
  Path dir;

  @Option(
      names = "--nodes",
      defaultValue = "3",
      description = "Server processes: 3 or 5. Default: ${DEFAULT-VALUE}.")
  int nodes;

  @Option(
      names = "--check",
      description =
          "Judge the recorded run in this directory again (history.jsonl, final-state.json) instead"
              + " of running a campaign.")
  Path check;

  @Option(
      names = "--failover",
      description =
          "Measures failover instead of running a campaign: kill (SIGKILL of the leader), stop"
              + " (SIGSTOP of the leader for 3 s) or isolate (the leader cut off from its peers for"
              + " 3 s, clients still reaching it), under one session pipelining --rate"
              + " increments/s, --faults times; prints the longest acknowledgement gap around each"
              + " fault, when another node led, and their p50/p99/max.")
  String failover;

  @Option(
      names = "--faults",
      defaultValue = "30",
      description = "With --failover: how many faults. Default: ${DEFAULT-VALUE}.")
  int faults;

  @Option(
      names = "--rate",
      defaultValue = "400",
      description = "With --failover: increments per second. Default: ${DEFAULT-VALUE}.")
  int rate;

  @Option(
      names = "--settle",
      defaultValue = "5s",
      converter = DurationConverter.OrZero.class,
      description =
          "With --failover kill: how long the restarted node runs before the next fault (0s: the"
              + " next fault comes as soon as it has caught up). Default: ${DEFAULT-VALUE}.")
  Duration settle;

  @Option(
      names = "--groups",
      defaultValue = "1",
      description =
          "With --workload kv: run the servers with this many data groups (--groups of idem"
              + " server), every group's replicas compared at the end; above 1 there is no"
              + " greedy client, runs under 3 minutes leave the node replacement out, and --auth"
              + " grants the clients' role in every group. Default: ${DEFAULT-VALUE}.")
  int groups;

  @Option(
      names = "--auth",
      description =
          "Run the servers with TLS and access control on: client certificates required, the"
              + " members named, every operation of the clients checked against their role (the"
              + " certificates are made with openssl in the run's directory). Default: plaintext.")
  boolean auth;

  @Option(
      names = "--greedy-clients",
      description =
          "0 or 1: a greedy client floods the cluster alongside the checked clients (sessions, big"
              + " values, new keys and idempotency keys until refused at its quotas, a full"
              + " pipeline, a stream that never reads its answers); as CN=greedy with a role of"
              + " small quotas under --auth, else as the anonymous principal. It must hit a"
              + " quota for the verdict to pass. Default: the profile's (1).")
  Integer greedyClients;

  @Override
  public Integer call() throws Exception {
    if (check != null) {
      return checkAgain();
    }
    if (failover != null) {
      return failover();
    }
    long chosenSeed = seed != null ? seed : System.nanoTime();
    if (workload == Workload.keys) {
      return keys(chosenSeed);
    }
    if (workload == Workload.kafka) {
      return kafka(chosenSeed);
    }
    if (!store.equals("idem")) {
      spec.commandLine().getErr().println("idem: --store applies to --workload keys");
      return 2;
    }
    Campaign.Settings s;
    switch (profile) {
      case "ci" -> s = Campaign.Settings.ci(chosenSeed, negativeControl);
      case "long" -> s = Campaign.Settings.longRun(chosenSeed, negativeControl);
      default -> {
        spec.commandLine().getErr().println("idem: --profile must be ci or long, got " + profile);
        return 2;
      }
    }
    if (duration != null) {
      s = s.lasting(duration);
    }
    if (nodes != 3 && nodes != 5) {
      spec.commandLine().getErr().println("idem: --nodes must be 3 or 5, got " + nodes);
      return 2;
    }
    if (greedyClients != null) {
      if (greedyClients != 0 && greedyClients != 1) {
        spec.commandLine().getErr().println("idem: --greedy-clients must be 0 or 1");
        return 2;
      }
      s = s.withGreedyClients(greedyClients);
    }
    s = s.on(nodes).secured(auth);
    if (groups != 1) {
      try {
        s = s.withGroups(groups);
      } catch (IllegalArgumentException e) {
        spec.commandLine().getErr().println("idem: " + e.getMessage());
        return 2;
      }
    }
    Path where =
        dir != null ? Files.createDirectories(dir) : Files.createTempDirectory("idem-verify");
    var out = spec.commandLine().getOut();
    out.printf(
        "campaign: profile %s, seed %d, %d nodes, %d data group%s, %s, data and history in %s%n",
        profile, s.seed(), s.nodes(), s.groups(), s.groups() == 1 ? "" : "s", s.duration(), where);
    Campaign.Report r = Campaign.run(where, s);
    long ops = r.opsByKind().values().stream().mapToLong(Long::longValue).sum();
    long faults = r.faults().values().stream().mapToLong(Long::longValue).sum();
    out.printf("seed                  %d%n", r.seed());
    out.printf("operations            %,d  %s  %s%n", ops, r.opsByKind(), r.opsByOutcome());
    out.printf("faults                %,d  %s%n", faults, r.faults());
    out.printf("client retries        %,d%n", r.retries());
    out.printf("duplicates suppressed %,d%n", r.duplicatesSuppressed());
    if (s.greedyClients() > 0) {
      out.printf("greedy client         %s%n", r.greedy());
    }
    Map<Violation.Kind, Long> byKind = print(r.violations(), r.undecidedRegisters());
    out.printf("history               %s%n", r.history());
    if (s.greedyClients() > 0 && r.greedy().quotaRefusals() == 0) {
      out.println(
          "verdict: FAIL: the greedy client hit no quota; its workload did not do what it is for");
      return 1;
    }
    boolean duplicatesFound = byKind.getOrDefault(Violation.Kind.DUPLICATE, 0L) > 0;
    if (negativeControl) {
      out.println(
          duplicatesFound
              ? "verdict: PASS: the checkers flagged the duplicates at-least-once retries cause "
                  + byKind
              : "verdict: FAIL: at-least-once retries caused no flagged duplicate; the checkers or"
                  + " the faults are too weak");
      return duplicatesFound ? 0 : 1;
    }
    boolean clean = r.violations().isEmpty() && r.undecidedRegisters().isEmpty();
    out.println(
        clean
            ? "verdict: PASS: no violations"
            : "verdict: FAIL: "
                + byKind
                + (r.undecidedRegisters().isEmpty() ? "" : " and undecided registers"));
    return clean ? 0 : 1;
  }

  private int kafka(long chosenSeed) throws Exception {
    if (check != null || nodes != 3) {
      spec.commandLine()
          .getErr()
          .println("idem: --workload kafka runs on 3 nodes, without --check");
      return 2;
    }
    String mode = negativeControl ? "plain" : store;
    if (!mode.equals("idem") && !mode.equals("postgres") && !mode.equals("plain")) {
      spec.commandLine()
          .getErr()
          .println("idem: --workload kafka runs on --store idem or postgres, got " + store);
      return 2;
    }
    KafkaCampaign.Settings s;
    switch (profile) {
      case "ci" -> s = KafkaCampaign.Settings.ci(chosenSeed, mode);
      case "long" ->
          s = KafkaCampaign.Settings.ci(chosenSeed, mode).lasting(Duration.ofMinutes(10));
      default -> {
        spec.commandLine().getErr().println("idem: --profile must be ci or long, got " + profile);
        return 2;
      }
    }
    if (duration != null) {
      s = s.lasting(duration);
    }
    Path where =
        dir != null ? Files.createDirectories(dir) : Files.createTempDirectory("idem-verify-kafka");
    var out = spec.commandLine().getOut();
    out.printf(
        "kafka campaign: %s, profile %s, seed %d, %s, %d consumers, %d partitions, %d records/s,"
            + " logs in %s%n",
        mode.equals("plain") ? "plain consumer (negative control) on idem" : "receiver on " + mode,
        profile,
        s.seed(),
        s.duration(),
        s.consumers(),
        s.partitions(),
        s.rate(),
        where);
    KafkaCampaign.Report r = KafkaCampaign.run(where, s);
    long faults = r.faults().values().stream().mapToLong(Long::longValue).sum();
    out.printf("seed                  %d%n", r.seed());
    out.printf("records               %,d%n", r.records());
    out.printf("ledger entries        %,d%n", r.entries());
    out.printf("faults                %,d  %s%n", faults, r.faults());
    Map<Violation.Kind, Long> byKind = print(r.violations(), java.util.List.of());
    if (s.expectsViolations()) {
      boolean caught = byKind.getOrDefault(Violation.Kind.DUPLICATE, 0L) > 0;
      out.println(
          caught
              ? "verdict: PASS: the checker flagged the duplicates a plain consumer causes "
                  + byKind
              : "verdict: FAIL: the plain consumer caused no flagged duplicate; the checker or the"
                  + " faults are too weak");
      return caught ? 0 : 1;
    }
    boolean clean = r.violations().isEmpty();
    out.println(clean ? "verdict: PASS: no violations" : "verdict: FAIL: " + byKind);
    return clean ? 0 : 1;
  }

  private int keys(long chosenSeed) throws Exception {
    KeysCampaign.Settings s;
    switch (profile) {
      case "ci" -> s = KeysCampaign.Settings.ci(chosenSeed, negativeControl);
      case "long" -> s = KeysCampaign.Settings.longRun(chosenSeed, negativeControl);
      default -> {
        spec.commandLine().getErr().println("idem: --profile must be ci or long, got " + profile);
        return 2;
      }
    }
    if (duration != null) {
      s = s.lasting(duration);
    }
    if (check != null || nodes != 3) {
      spec.commandLine().getErr().println("idem: --workload keys runs on 3 nodes, without --check");
      return 2;
    }
    try {
      s = s.on(store);
    } catch (IllegalArgumentException e) {
      spec.commandLine().getErr().println("idem: " + e.getMessage());
      return 2;
    }
    Path where =
        dir != null ? Files.createDirectories(dir) : Files.createTempDirectory("idem-verify-keys");
    var out = spec.commandLine().getOut();
    out.printf(
        "keys campaign: store %s, profile %s, seed %d, %s, %s, logs and journals in %s%n",
        s.store(),
        profile,
        s.seed(),
        s.duration(),
        s.fenced() ? "fenced writes" : "unfenced writes",
        where);
    KeysCampaign.Report r = KeysCampaign.run(where, s);
    long faults = r.faults().values().stream().mapToLong(Long::longValue).sum();
    out.printf("seed                  %d%n", r.seed());
    out.printf("store                 %s%n", r.store());
    out.printf("payments              %,d%n", r.payments());
    out.printf("worker answers        %,d%n", r.acknowledged());
    out.printf("fenced refusals       %,d%n", r.refusals());
    out.printf("faults                %,d  %s%n", faults, r.faults());
    Map<Violation.Kind, Long> byKind = print(r.violations(), java.util.List.of());
    if (s.expectsViolations()) {
      boolean caught = byKind.getOrDefault(Violation.Kind.DUPLICATE, 0L) > 0;
      String what = s.fenced() ? "seed 001's algorithm" : "unfenced writes";
      out.println(
          caught
              ? "verdict: PASS: the checker flagged the double payments "
                  + what
                  + " cause "
                  + byKind
              : "verdict: FAIL: "
                  + what
                  + " caused no flagged double payment; the checker or the faults are too weak");
      return caught ? 0 : 1;
    }
    boolean clean = r.violations().isEmpty();
    out.println(clean ? "verdict: PASS: no violations" : "verdict: FAIL: " + byKind);
    return clean ? 0 : 1;
  }

  private int failover() throws Exception {
    Path where =
        dir != null ? Files.createDirectories(dir) : Files.createTempDirectory("idem-failover");
    var out = spec.commandLine().getOut();
    FailoverBench.Kind kind;
    try {
      kind = FailoverBench.Kind.valueOf(failover.toUpperCase(java.util.Locale.ROOT));
    } catch (IllegalArgumentException e) {
      spec.commandLine()
          .getErr()
          .println("idem: --failover must be kill, stop or isolate, got " + failover);
      return 2;
    }
    FailoverBench.Settings s =
        new FailoverBench.Settings(kind, faults, rate, Duration.ofSeconds(3), settle);
    out.printf(
        "failover: %s of the leader x%d, %d increments/s, 3 server processes, settle %s, logs in"
            + " %s%n",
        failover, faults, rate, settle, where);
    FailoverBench.Report r = FailoverBench.run(where, s, out);
    out.printf(
        "%s: faults %d (%d skipped: no stable leader), longest gap p50 %d ms, p99 %d ms, max %d ms;"
            + " acks %,d, failed calls %d%n",
        failover,
        r.gapsMs().size(),
        r.skipped(),
        r.quantile(0.5),
        r.quantile(0.99),
        r.quantile(1.0),
        r.acks(),
        r.failures());
    out.printf("gaps (ms): %s%n", r.gapsMs());
    out.printf("new leader after (ms, -1: the old one led on): %s%n", r.electedMs());
    return 0;
  }

  private int checkAgain() {
    var out = spec.commandLine().getOut();
    java.util.List<String> undecided = new java.util.ArrayList<>();
    java.util.List<Violation> violations;
    try {
      violations = Campaign.check(check, undecided);
    } catch (java.io.IOException | IllegalArgumentException e) {
      spec.commandLine().getErr().println("idem: " + Errors.oneLine(e));
      return 2;
    }
    Map<Violation.Kind, Long> byKind = print(violations, undecided);
    try {
      Map<String, Long> faults = Campaign.recordedFaults(check);
      if (!faults.isEmpty()) {
        out.printf(
            "faults                %,d: %s%n",
            faults.values().stream().mapToLong(Long::longValue).sum(), faults);
      }
    } catch (java.io.IOException e) {
      spec.commandLine().getErr().println("idem: cannot read the faults: " + Errors.oneLine(e));
    }
    boolean clean = violations.isEmpty() && undecided.isEmpty();
    out.println(clean ? "verdict: PASS: no violations" : "verdict: FAIL: " + byKind);
    return clean ? 0 : 1;
  }

  /** Prints the violations (the first ten spelled out) and undecided registers; counts by kind. */
  private Map<Violation.Kind, Long> print(
      java.util.List<Violation> violations, java.util.List<String> undecided) {
    var out = spec.commandLine().getOut();
    out.printf("violations            %,d%n", violations.size());
    Map<Violation.Kind, Long> byKind = new java.util.EnumMap<>(Violation.Kind.class);
    for (Violation v : violations) {
      byKind.merge(v.kind(), 1L, Long::sum);
    }
    violations.stream().limit(10).forEach(v -> out.println("  " + v));
    if (!undecided.isEmpty()) {
      out.printf(
          "undecided             %s: the linearizability search gave up on these registers%n",
          undecided);
    }
    return byKind;
  }
}
