package io.idem.lab;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.testkit.LocalCluster;
import io.idem.testkit.stores.RedisServer;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code idem demo payments --serve} as a user runs it: the command in a JVM of its own, stopped
 * with a signal sent to its PID, as Ctrl-C and {@code kill} do; and its {@code --store} options.
 */
@Timeout(180)
class PaymentsServeTest {
  /** How long the stopped process may take to clean up and exit. */
  static final Duration EXIT_BOUND = Duration.ofSeconds(30);

  @TempDir Path dir;

  @Test
  void sigintStopsTheServiceAndDeletesItsEmbeddedStoresFolder() throws Exception {
    stopAndCheckTheFolderIsGone("INT");
  }

  @Test
  void sigtermToo() throws Exception {
    stopAndCheckTheFolderIsGone("TERM");
  }

  private void stopAndCheckTheFolderIsGone(String signal) throws Exception {
    Path tmp = Files.createDirectories(dir.resolve("tmp"));
    int port = LocalCluster.freePort();
    Served served = Served.start(tmp, "demo", "payments", "--serve", "--port", "" + port);
    try {
      String embedded = served.awaitLine("embedded Idem store");
      served.awaitLine("listening on http://127.0.0.1:" + port);
      assertThat(folders(tmp)).as("the embedded store's folder, while it runs").hasSize(1);
      Path folder = folders(tmp).get(0);
      assertThat(get(URI.create("http://127.0.0.1:" + port + "/accounts/alice")).statusCode())
          .isEqualTo(200);

      long t0 = System.nanoTime();
      served.signal(signal);
      assertThat(served.process.waitFor(EXIT_BOUND.toSeconds(), TimeUnit.SECONDS))
          .as("exited within " + EXIT_BOUND + " of SIG" + signal)
          .isTrue();
      System.out.printf(
          "SIG%s: exited with %d after %d ms%n",
          signal, served.process.exitValue(), (System.nanoTime() - t0) / 1_000_000);
      assertThat(folders(tmp)).as("left behind after SIG" + signal).isEmpty();
      // And the service said so when it started.
      assertThat(embedded).contains(folder.toString()).contains("deleted when the service stops");
    } finally {
      served.process.destroyForcibly();
    }
  }

  @Test
  void serveRunsOnTheRedisStoreItIsGiven() throws Exception {
    try (RedisServer redis = RedisServer.start(dir.resolve("redis"), RedisServer.Aof.OFF)) {
      int port = LocalCluster.freePort();
      Served served =
          Served.start(
              Files.createDirectories(dir.resolve("tmp")),
              "demo",
              "payments",
              "--serve",
              "--port",
              "" + port,
              "--store",
              "redis",
              "--redis-uri",
              redis.uri(),
              "--redis-prefix",
              "cli-test");
      RedisClient client = RedisClient.create(redis.uri());
      try (StatefulRedisConnection<String, String> c = client.connect()) {
        assertThat(served.awaitLine("listening on")).contains("(redis store");
        URI base = URI.create("http://127.0.0.1:" + port);
        HttpResponse<String> w =
            HttpClient.newHttpClient()
                .send(
                    HttpRequest.newBuilder(base.resolve("/accounts/alice/withdrawals"))
                        .timeout(Duration.ofSeconds(30))
                        .header("Idempotency-Key", "\"cli test 1\"")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"amount\":30}"))
                        .build(),
                    HttpResponse.BodyHandlers.ofString());
        assertThat(w.statusCode()).as(w.body()).isEqualTo(201);
        assertThat(c.sync().get("{cli-test}:balance/alice")).isEqualTo("999970");
        URI withdrawal = base.resolve(new URI(w.headers().firstValue("Location").orElseThrow()));
        assertThat(get(withdrawal).body()).isEqualTo(w.body());
        served.signal("TERM");
        assertThat(served.process.waitFor(EXIT_BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
      } finally {
        served.process.destroyForcibly();
        client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
      }
    }
  }

  @Test
  void storeOptionsAreCheckedInOneLine() {
    assertError(2, "--store must be idem, redis or postgres, got mongo", "--store", "mongo");
    assertError(2, "--store redis needs --redis-uri", "--store", "redis");
    assertError(2, "--store postgres needs --jdbc-url", "--store", "postgres");
    assertError(
        2,
        "--servers is for --store idem only",
        "--store",
        "redis",
        "--redis-uri",
        "redis://127.0.0.1:9",
        "--servers",
        "127.0.0.1:9");
    StringWriter err = new StringWriter();
    assertThat(cli(new StringWriter(), err, "demo", "payments", "--store", "redis")).isEqualTo(2);
    assertThat(err.toString().strip())
        .isEqualTo(
            "idem: --store applies to --serve (the demo under faults runs on its own embedded Idem"
                + " store)");
    StringWriter help = new StringWriter();
    assertThat(cli(help, new StringWriter(), "demo", "payments", "--help")).isZero();
    assertThat(help.toString().replaceAll("\\s+", " "))
        .contains("--store=idem|redis|postgres")
        .contains("--redis-uri=URI")
        .contains("--jdbc-url=URL")
        .contains("deleted when the service stops");
  }

  private static void assertError(int code, String message, String... storeArgs) {
    List<String> args = new ArrayList<>(List.of("demo", "payments", "--serve", "--port", "0"));
    args.addAll(List.of(storeArgs));
    StringWriter err = new StringWriter();
    assertThat(cli(new StringWriter(), err, args.toArray(new String[0])))
        .as(String.join(" ", args))
        .isEqualTo(code);
    assertThat(err.toString().strip()).contains(message);
    assertThat(err.toString().strip().lines().count()).isEqualTo(1);
  }

  private static int cli(StringWriter out, StringWriter err, String... args) {
    return IdemLab.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
        .execute(args);
  }

  private static HttpResponse<String> get(URI uri) throws Exception {
    return HttpClient.newHttpClient()
        .send(
            HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).build(),
            HttpResponse.BodyHandlers.ofString());
  }

  /** The embedded stores' folders in {@code tmp}. */
  private static List<Path> folders(Path tmp) throws IOException {
    try (Stream<Path> s = Files.list(tmp)) {
      return s.filter(p -> p.getFileName().toString().startsWith("idem-payments")).toList();
    }
  }

  /** The idem command in a JVM of its own, its temporary folders in {@code tmp}. */
  private record Served(Process process, BlockingQueue<String> lines) {
    static Served start(Path tmp, String... args) throws IOException {
      List<String> cmd = new ArrayList<>();
      // A job started in the background of a non-interactive shell (as CI and nohup runs are)
      // inherits SIGINT ignored, and a JVM that starts with SIGINT ignored keeps ignoring it: the
      // command would never see the Ctrl-C this test sends. A terminal's foreground job has it
      // default; coreutils' env sets it so (and execs java: the PID stays the command's).
      cmd.addAll(List.of("env", "--default-signal=INT"));
      cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      cmd.addAll(
          List.of(
              "-Xmx512m",
              "-Djava.io.tmpdir=" + tmp,
              "-cp",
              System.getProperty("java.class.path"),
              IdemLab.class.getName()));
      cmd.addAll(List.of(args));
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      BlockingQueue<String> lines = new LinkedBlockingQueue<>();
      Thread reader =
          new Thread(
              () -> {
                try (BufferedReader r =
                    new BufferedReader(
                        new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                  for (String line; (line = r.readLine()) != null; ) {
                    System.out.println("  [idem " + p.pid() + "] " + line);
                    lines.add(line);
                  }
                } catch (IOException e) {
                  // the process is gone
                }
              },
              "served-output");
      reader.setDaemon(true);
      reader.start();
      return new Served(p, lines);
    }

    /** The first line that contains {@code text}, within 90 s. */
    String awaitLine(String text) throws InterruptedException {
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      while (System.nanoTime() < end) {
        String line = lines.poll(1, TimeUnit.SECONDS);
        if (line != null && line.contains(text)) {
          return line;
        }
        if (line == null && !process.isAlive()) {
          throw new AssertionError("exited with " + process.exitValue() + " before: " + text);
        }
      }
      throw new AssertionError("no line with '" + text + "' within 90 s");
    }

    /** {@code kill -<signal> <pid>}: what Ctrl-C (INT) or a service manager (TERM) sends. */
    void signal(String signal) throws Exception {
      Process kill =
          new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid()))
              .inheritIO()
              .start();
      assertThat(kill.waitFor(10, TimeUnit.SECONDS)).isTrue();
      assertThat(kill.exitValue()).as("kill -" + signal).isZero();
    }
  }
}
