package io.idem.verify;

import io.idem.client.ClientTls;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The campaign's client processes: each a {@link ClientWorker} in a JVM of its own, appending to
 * the lists with its own identity file and journal ({@code w0.id}, {@code w0.jsonl}, {@code w0.log}
 * in the run's directory), killed and restarted by the {@link Nemesis}.
 */
final class ClientProcesses {
  private final Path dir;
  private final Campaign.Settings settings;
  private final ProcessCluster cluster;
  private final long t0;
  private final long end;
  private final List<Process> workers = new ArrayList<>();

  /**
   * The settings' client processes, not started yet.
   *
   * @param t0 the campaign's time origin (System.nanoTime), for the journals' times
   * @param end when the clients stop (System.nanoTime)
   */
  ClientProcesses(Path dir, Campaign.Settings settings, ProcessCluster cluster, long t0, long end) {
    this.dir = dir;
    this.settings = settings;
    this.cluster = cluster;
    this.t0 = t0;
    this.end = end;
  }

  /** Starts the settings' client processes. */
  void startAll() {
    for (int w = 0; w < settings.clientProcesses(); w++) {
      workers.add(start(w));
    }
  }

  boolean isEmpty() {
    return workers.isEmpty();
  }

  int size() {
    return workers.size();
  }

  /** Client process {@code w} as it runs now. */
  Process get(int w) {
    return workers.get(w);
  }

  /** Starts client process {@code w} again (it resumes its session from its identity file). */
  void restart(int w) {
    workers.set(w, start(w));
  }

  private static long workerBase(int w) {
    return (100L + w) * 1_000_000_000L;
  }

  private Process start(int w) {
    String label = "w" + w;
    List<String> args =
        new ArrayList<>(
            List.of(
                String.join(",", cluster.clientAddresses()),
                dir.resolve(label + ".id").toString(),
                dir.resolve(label + ".jsonl").toString(),
                label,
                Long.toString(workerBase(w)),
                Long.toString(t0),
                Long.toString(end),
                Integer.toString(settings.window()),
                Integer.toString(Workloads.LISTS),
                Long.toString(settings.seed() * 31 + 1_000 + w)));
    ClientTls tls = cluster.clientTls();
    if (tls != null) {
      args.addAll(
          List.of(
              tls.trustedCertificates().toString(),
              tls.certificateChain().toString(),
              tls.privateKey().toString()));
    }
    return ProcessCluster.launch(
        List.of("-Xmx256m", "-XX:+UseSerialGC"),
        ClientWorker.class.getName(),
        args,
        dir.resolve(label + ".log"));
  }

  /**
   * Waits for the client processes to finish, and reads their journals. One still running 120 s
   * after the end is killed, and {@code count}ed.
   */
  List<Op> awaitAll(Consumer<String> count) throws InterruptedException, IOException {
    List<Op> ops = new ArrayList<>();
    for (int w = 0; w < workers.size(); w++) {
      Process p = workers.get(w);
      if (!p.waitFor(120, TimeUnit.SECONDS)) {
        p.destroyForcibly().waitFor(10, TimeUnit.SECONDS); // what it had in flight stays unknown
        count.accept("client process still running 120 s after the end (killed)");
      }
      ops.addAll(History.readJournal(dir.resolve("w" + w + ".jsonl")));
    }
    return ops;
  }

  /** Kills every client process (at the end of the run, whatever happened). */
  void destroyAll() {
    for (Process w : workers) {
      w.destroyForcibly();
    }
  }
}
