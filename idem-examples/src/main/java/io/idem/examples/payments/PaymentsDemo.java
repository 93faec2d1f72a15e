package io.idem.examples.payments;

import io.idem.client.IdemClient;
import io.idem.testkit.FaultProxy;
import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.io.PrintWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.Charset;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The payments example under faults: an embedded 3-node Idem store in this process, the payments
 * service in a process of its own, and clients that withdraw through a TCP proxy and retry each
 * withdrawal with its key until they hold an answer. Faults: clients that drop responses they got
 * (a response lost on the way, as far as the client knows), a network that swallows every response
 * for a while, a killed Idem leader, and the HTTP server killed with SIGKILL and started again.
 * Then it prints the balances and judges them against the acknowledged withdrawals: each account
 * must be debited exactly what was acknowledged. With the filter off (the negative control) the
 * retries debit again and the verdict finds it.
 */
public final class PaymentsDemo {
  /** The accounts and their opening balance. */
  static final List<String> ACCOUNTS = List.of("alice", "bob", "carol");

  static final long OPENING_BALANCE = 1_000_000;

  /** How the run goes. */
  public record Options(int seconds, boolean idempotency, int clients, double dropRate, long seed) {
    /** Validates. */
    public Options {
      if (seconds < 8 || seconds > 600) {
        throw new IllegalArgumentException("seconds must be in [8, 600], got " + seconds);
      }
      if (clients < 1 || clients > 64) {
        throw new IllegalArgumentException("clients must be in [1, 64], got " + clients);
      }
      if (dropRate < 0 || dropRate > 0.9) {
        throw new IllegalArgumentException("dropRate must be in [0, 0.9], got " + dropRate);
      }
    }
  }

  /**
   * What a run found.
   *
   * @param acknowledged withdrawals the clients hold an answer for
   * @param responsesDropped answers a client threw away (then retried)
   * @param replays answers marked {@code Idempotent-Replayed}
   * @param retries requests sent again after a failure, a timeout, a 409 or a drop
   * @param unknown withdrawals given up on without an answer (their amount may or may not be gone)
   * @param extraDebited how much more the accounts lost than the acknowledged withdrawals (and
   *     those given up on) allow: double withdrawals
   * @param missing how much less they lost than the acknowledged withdrawals: lost withdrawals
   * @param pass whether every balance is what the acknowledged withdrawals say
   */
  public record Report(
      long acknowledged,
      long responsesDropped,
      long replays,
      long retries,
      long unknown,
      long extraDebited,
      long missing,
      boolean pass) {}

  private final Options options;
  private final PrintWriter out;
  private final long started = System.nanoTime();
  private final Map<String, AtomicLong> acknowledgedAmount = new ConcurrentHashMap<>();
  private final Map<String, AtomicLong> unknownAmount = new ConcurrentHashMap<>();
  private final AtomicLong acknowledged = new AtomicLong();
  private final AtomicLong dropped = new AtomicLong();
  private final AtomicLong replays = new AtomicLong();
  private final AtomicLong retries = new AtomicLong();
  private final AtomicLong conflicts = new AtomicLong();
  private final AtomicLong failures = new AtomicLong();
  private final AtomicLong unknown = new AtomicLong();
  private final AtomicLong unexpected = new AtomicLong();
  private volatile boolean stopping;

  private PaymentsDemo(Options options, PrintWriter out) {
    this.options = options;
    this.out = out;
    for (String a : ACCOUNTS) {
      acknowledgedAmount.put(a, new AtomicLong());
      unknownAmount.put(a, new AtomicLong());
    }
  }

  /** Runs the demo, printing to {@code out}. */
  public static Report run(Options options, PrintWriter out) throws Exception {
    return new PaymentsDemo(options, out).run();
  }

  private Report run() throws Exception {
    Path dir = Files.createTempDirectory("idem-payments-demo");
    say(
        "starting a 3-node Idem store in this process; the payments service (Idempotency-Key filter "
            + (options.idempotency() ? "on" : "OFF: the negative control")
            + ") in a process of its own");
    try (LocalCluster cluster = LocalCluster.start(3, dir.resolve("cluster"))) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      try (IdemClient admin = IdemClient.builder().servers(cluster.clientAddresses()).build()) {
        for (String a : ACCOUNTS) {
          PaymentsService.openAccount(admin, a, OPENING_BALANCE);
        }
        int port = LocalCluster.freePort();
        ServiceProcess service = new ServiceProcess(dir, port, cluster.clientAddresses());
        try (FaultProxy proxy = FaultProxy.start("127.0.0.1:" + port)) {
          service.start();
          service.awaitHealthy();
          say("payments service up on port " + port + "; clients go through a proxy");
          runClients(cluster, service, proxy);
        } finally {
          service.kill();
        }
        return verdict(admin);
      }
    } finally {
      Durations.deleteTree(dir);
    }
  }

  private void runClients(LocalCluster cluster, ServiceProcess service, FaultProxy proxy)
      throws Exception {
    URI base = URI.create("http://" + proxy.address());
    List<Thread> threads = new ArrayList<>();
    for (int i = 0; i < options.clients(); i++) {
      int client = i;
      Thread t = new Thread(() -> client(client, base), "payments-client-" + i);
      t.start();
      threads.add(t);
    }
    double s = options.seconds();
    long t0 = System.nanoTime();
    int phase = 0;
    int leader = -1;
    long nextReport = 0;
    double end = s;
    while (seconds(t0) < end) {
      double t = seconds(t0);
      if (phase == 0 && t >= s * 0.1) {
        say("fault: the network swallows every response for 1.5 s; clients time out and retry");
        proxy.blackholeResponses();
        phase++;
      } else if (phase == 1 && t >= s * 0.1 + 1.5) {
        proxy.passResponses();
        proxy.resetConnections();
        say("fault over: connections reset");
        phase++;
      } else if (phase == 2 && t >= s * 0.25) {
        leader = cluster.waitForLeader(Duration.ofSeconds(30));
        say("fault: killing the Idem leader n" + (leader + 1));
        cluster.kill(leader);
        phase++;
      } else if (phase == 3 && t >= s * 0.4) {
        cluster.restart(leader);
        say("n" + (leader + 1) + " restarted");
        phase++;
      } else if (phase == 4 && t >= s * 0.5) {
        say("fault: kill -9 of the payments service, mid-request");
        service.kill();
        proxy.resetConnections();
        Thread.sleep(500);
        service.start();
        service.awaitHealthy();
        say("payments service restarted on the same port");
        // However long the restart took, the clients get time after the last fault.
        end = Math.max(end, seconds(t0) + Math.max(3, s * 0.25));
        phase++;
      }
      long now = (long) t;
      if (now >= nextReport) {
        out.printf(
            "  %3ds  acknowledged %6d   dropped by clients %5d   replayed %5d   409s %4d   errors %4d%n",
            now, acknowledged.get(), dropped.get(), replays.get(), conflicts.get(), failures.get());
        nextReport = now + 2;
      }
      Thread.sleep(20);
    }
    say("stopping clients; each finishes the withdrawal it holds");
    stopping = true;
    for (Thread t : threads) {
      t.join(TimeUnit.SECONDS.toMillis(90));
    }
  }

  /** One client: withdrawals one after another, each retried with its key until answered. */
  private void client(int id, URI base) {
    Random random = new Random(options.seed() * 31 + id);
    HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
    for (long n = 0; !stopping; n++) {
      String account = ACCOUNTS.get(random.nextInt(ACCOUNTS.size()));
      long amount = 1L + random.nextInt(100);
      withdraw(http, random, base, account, amount, "w-" + options.seed() + "-" + id + "-" + n);
    }
  }

  private void withdraw(
      HttpClient http, Random random, URI base, String account, long amount, String key) {
    HttpRequest request =
        HttpRequest.newBuilder(base.resolve("/accounts/" + account + "/withdrawals"))
            .timeout(Duration.ofSeconds(2))
            .header("Idempotency-Key", "\"" + key + "\"")
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":" + amount + "}"))
            .build();
    long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    int drops = 0;
    for (int attempt = 0; ; attempt++) {
      if (attempt > 0) {
        retries.incrementAndGet();
      }
      if (System.nanoTime() > giveUp) {
        unknown.incrementAndGet();
        unknownAmount.get(account).addAndGet(amount);
        return;
      }
      HttpResponse<String> r;
      try {
        r = http.send(request, HttpResponse.BodyHandlers.ofString());
      } catch (IOException e) {
        failures.incrementAndGet(); // a timeout, a reset, a refused connection: retry
        pause(100);
        continue;
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      int status = r.statusCode();
      if (status == 201) {
        if (drops < 2 && random.nextDouble() < options.dropRate()) {
          drops++;
          dropped.incrementAndGet(); // the answer is lost: the client cannot know it was debited
          continue;
        }
        if (r.headers().firstValue("Idempotent-Replayed").isPresent()) {
          replays.incrementAndGet();
        }
        acknowledged.incrementAndGet();
        acknowledgedAmount.get(account).addAndGet(amount);
        return;
      }
      if (status == 409 || status >= 500) {
        if (status == 409) {
          conflicts.incrementAndGet(); // in progress (a dead owner's, until its deadline): later
        } else {
          failures.incrementAndGet();
        }
        pause(status == 409 ? 200 : 100);
        continue;
      }
      unexpected.incrementAndGet(); // 4xx: a bug in the demo or the service
      out.println("  unexpected answer " + status + ": " + r.body());
      return;
    }
  }

  private static void pause(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private Report verdict(IdemClient admin) {
    out.println();
    out.println("balances");
    out.printf(
        "  %-8s %10s %14s %12s %12s %10s%n",
        "account", "opening", "acknowledged", "expected", "balance", "off by");
    long extra = 0;
    long missing = 0;
    for (String a : ACCOUNTS) {
      long ack = acknowledgedAmount.get(a).get();
      long maybe = unknownAmount.get(a).get();
      long expected = OPENING_BALANCE - ack;
      long balance = PaymentsService.balance(admin, a).orElseThrow();
      // Withdrawals given up on may or may not have happened: the balance may be that much lower.
      if (balance < expected - maybe) {
        extra += expected - maybe - balance;
      } else if (balance > expected) {
        missing += balance - expected;
      }
      out.printf(
          "  %-8s %10d %14d %12d %12d %10d%n",
          a, OPENING_BALANCE, ack, expected, balance, balance - expected);
    }
    out.println();
    out.printf(
        "withdrawals acknowledged %d; responses dropped by clients %d; replayed %d; retries %d;"
            + " 409s %d; errors and timeouts %d; given up %d; unexpected answers %d%n",
        acknowledged.get(),
        dropped.get(),
        replays.get(),
        retries.get(),
        conflicts.get(),
        failures.get(),
        unknown.get(),
        unexpected.get());
    boolean pass = extra == 0 && missing == 0 && unexpected.get() == 0 && acknowledged.get() > 0;
    if (pass) {
      out.println(
          "verdict: PASS: every account was debited exactly the acknowledged withdrawals, across "
              + dropped.get()
              + " dropped responses, a killed Idem leader and a killed payments service");
    } else if (extra > 0) {
      out.println(
          "verdict: FAIL: DOUBLE WITHDRAWALS: the accounts lost "
              + extra
              + " more than the acknowledged withdrawals"
              + (options.idempotency() ? "" : " (the filter was off: retries debited again)"));
    } else {
      out.println(
          "verdict: FAIL: "
              + (missing > 0 ? "acknowledged withdrawals missing: " + missing : "")
              + (unexpected.get() > 0 ? " unexpected answers: " + unexpected.get() : "")
              + (acknowledged.get() == 0 ? " nothing was acknowledged" : ""));
    }
    return new Report(
        acknowledged.get(),
        dropped.get(),
        replays.get(),
        retries.get(),
        unknown.get(),
        extra,
        missing,
        pass);
  }

  private double seconds(long t0) {
    return (System.nanoTime() - t0) / 1e9;
  }

  private void say(String what) {
    out.printf("[%3ds] %s%n", TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - started), what);
  }

  /** The payments service as a child JVM: started, killed with SIGKILL, started again. */
  private final class ServiceProcess {
    private final Path dir;
    private final int port;
    private final List<String> servers;
    private Process process;
    private int starts;

    ServiceProcess(Path dir, int port, List<String> servers) {
      this.dir = dir;
      this.port = port;
      this.servers = servers;
    }

    void start() throws IOException {
      List<String> cmd = new ArrayList<>();
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.addAll(
          List.of(
              "-Xmx512m",
              "-XX:+UseG1GC",
              "-XX:MaxGCPauseMillis=20",
              "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
              "-cp",
              System.getProperty("java.class.path"),
              PaymentsService.class.getName(),
              "--port",
              Integer.toString(port),
              "--servers",
              String.join(",", servers),
              "--in-progress-timeout",
              "3s",
              "--balance",
              Long.toString(OPENING_BALANCE)));
      if (!options.idempotency()) {
        cmd.add("--no-idempotency");
      }
      Path log = dir.resolve("payments-service-" + (++starts) + ".log");
      process =
          new ProcessBuilder(cmd)
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
              .start();
    }

    void awaitHealthy() throws Exception {
      HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(1)).build();
      URI uri = URI.create("http://127.0.0.1:" + port + "/accounts/alice");
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (System.nanoTime() < deadline) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "the payments service exited: "
                  + Files.readString(dir.resolve("payments-service-" + starts + ".log")));
        }
        try {
          HttpResponse<String> r =
              http.send(
                  HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(2)).build(),
                  HttpResponse.BodyHandlers.ofString());
          if (r.statusCode() == 200) {
            return;
          }
        } catch (IOException e) {
          // not up yet
        }
        Thread.sleep(100);
      }
      throw new IllegalStateException("the payments service did not come up within 60 s");
    }

    /** SIGKILL: no shutdown hook, no release of keys, requests cut wherever they are. */
    void kill() throws InterruptedException {
      if (process != null && process.isAlive()) {
        process.destroyForcibly();
        process.waitFor(30, TimeUnit.SECONDS);
      }
    }
  }

  /** {@code java ... PaymentsDemo [--seconds N] [--no-idempotency] [--clients N]}. */
  public static void main(String[] args) throws Exception {
    Map<String, String> flags = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--no-idempotency")) {
        flags.put("no-idempotency", "true");
      } else if (args[i].startsWith("--") && i + 1 < args.length) {
        flags.put(args[i].substring(2), args[++i]);
      } else {
        System.err.println("usage: PaymentsDemo [--seconds N] [--clients N] [--no-idempotency]");
        System.exit(2);
      }
    }
    Options o =
        new Options(
            Integer.parseInt(flags.getOrDefault("seconds", "20")),
            !flags.containsKey("no-idempotency"),
            Integer.parseInt(flags.getOrDefault("clients", "8")),
            Double.parseDouble(flags.getOrDefault("drop-rate", "0.25")),
            Long.parseLong(flags.getOrDefault("seed", Long.toString(System.nanoTime() % 100_000))));
    System.exit(run(o, new PrintWriter(System.out, true, Charset.defaultCharset())).pass() ? 0 : 1);
  }
}
