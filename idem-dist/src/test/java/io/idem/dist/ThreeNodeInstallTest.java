package io.idem.dist;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The archive as an operator uses it: unpacked into a directory, three nodes started from their
 * configuration files by {@code bin/idem server} with only a JRE (found through {@code JAVA_HOME}),
 * written and read through {@code bin/idem kv}, stopped with SIGTERM, and started again with their
 * data.
 */
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class ThreeNodeInstallTest {
  /** How long a node may take to stop after SIGTERM. */
  static final Duration STOP_TIMEOUT = Duration.ofSeconds(60);

  /** How long one {@code bin/idem} client command may take, JVM start included. */
  static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(90);

  /** How long the cluster may take to elect a leader and take a write. */
  static final Duration READY_TIMEOUT = Duration.ofMinutes(3);

  /** The exit status of {@code idem kv get} for a key the cluster does not have. */
  static final int NOT_FOUND = 3;

  @TempDir Path dir;
  Path home;
  final List<String> ids = List.of("n1", "n2", "n3");
  final List<Integer> clientPorts = new ArrayList<>();
  final Process[] nodes = new Process[3];

  @AfterEach
  void stopEverything() throws InterruptedException {
    for (Process p : nodes) {
      if (p != null && p.isAlive()) {
        p.destroyForcibly();
        p.waitFor(30, TimeUnit.SECONDS);
      }
    }
  }

  @Test
  void threeNodesFromTheirConfigFilesStopCleanlyAndKeepTheirData() throws Exception {
    home = Archive.unpack(dir);
    writeConfigs();
    startAll();
    String servers = servers();
    awaitWrite(servers, "greeting", "hello");
    awaitWrite(servers, "last", "before-stop");
    Result read = awaitRead(servers, "greeting");
    assertThat(read.exit()).as(read.output()).isZero();
    assertThat(read.output()).contains("hello");

    stopAll();
    for (int i = 0; i < 3; i++) {
      String log = Files.readString(log(i), UTF_8);
      assertThat(log)
          .as("node %s's log", ids.get(i))
          .contains("idem-server " + ids.get(i) + ": stopped");
    }

    startAll();
    for (String[] kv : new String[][] {{"greeting", "hello"}, {"last", "before-stop"}}) {
      Result again = awaitRead(servers, kv[0]);
      assertThat(again.exit()).as("%s after the restart: %s", kv[0], again.output()).isZero();
      assertThat(again.output()).as(kv[0]).contains(kv[1]);
    }
    stopAll();
  }

  /** One configuration file per node, in conf/ of the installation, with free loopback ports. */
  private void writeConfigs() throws IOException {
    List<String> peers = new ArrayList<>();
    for (String id : ids) {
      int client = freePort();
      clientPorts.add(client);
      peers.add(id + "=127.0.0.1:" + freePort() + ":" + client);
    }
    for (int i = 0; i < 3; i++) {
      Files.writeString(
          config(i),
          "# node "
              + ids.get(i)
              + " of the distribution test\n"
              + "id = "
              + ids.get(i)
              + "\n"
              + "data-dir = "
              + dir.resolve("data-" + ids.get(i))
              + "\n"
              + "peers = "
              + String.join(",", peers)
              + "\n"
              + "tick-ms = 200\n",
          UTF_8);
    }
  }

  private Path config(int i) {
    return home.resolve("conf/" + ids.get(i) + ".conf");
  }

  private Path log(int i) {
    return dir.resolve(ids.get(i) + ".log");
  }

  private String servers() {
    return clientPorts.stream().map(p -> "127.0.0.1:" + p).collect(Collectors.joining(","));
  }

  private void startAll() throws IOException {
    for (int i = 0; i < 3; i++) {
      Files.writeString(
          log(i),
          "",
          UTF_8,
          java.nio.file.StandardOpenOption.CREATE,
          java.nio.file.StandardOpenOption.TRUNCATE_EXISTING);
      nodes[i] =
          command(List.of("server", "--config", config(i).toString()))
              .redirectOutput(log(i).toFile())
              .start();
    }
  }

  /**
   * SIGTERM to every node, by its PID (bin/idem execs java, so the PID is the JVM's), then a
   * bounded wait: a clean stop exits with 143, the status of a JVM that SIGTERM ended.
   */
  private void stopAll() throws Exception {
    for (Process p : nodes) {
      p.destroy();
    }
    for (int i = 0; i < 3; i++) {
      boolean exited = nodes[i].waitFor(STOP_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
      assertThat(exited).as("%s stopped within %s", ids.get(i), STOP_TIMEOUT).isTrue();
      assertThat(nodes[i].exitValue())
          .as("%s's exit status; log:%n%s", ids.get(i), Files.readString(log(i), UTF_8))
          .isEqualTo(143);
    }
  }

  /** {@code bin/idem ...} with only JAVA_HOME to find Java: no java on the PATH. */
  private ProcessBuilder command(List<String> args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(home.resolve("bin/idem").toString());
    cmd.addAll(args);
    ProcessBuilder b = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true);
    Map<String, String> env = b.environment();
    env.keySet()
        .removeIf(k -> k.startsWith("IDEM_") || k.startsWith("JAVA") || k.startsWith("JDK_"));
    env.put("JAVA_HOME", System.getProperty("java.home"));
    env.put("PATH", "/usr/bin:/bin");
    env.put("IDEM_JAVA_OPTS", "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1");
    return b;
  }

  record Result(int exit, String output) {}

  /** Runs a client command to its end, within {@link #COMMAND_TIMEOUT}. */
  private Result idem(String... args) throws Exception {
    Path out = Files.createTempFile(dir, "cmd", ".out");
    Process p = command(List.of(args)).redirectOutput(out.toFile()).start();
    try {
      if (!p.waitFor(COMMAND_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        throw new AssertionError(
            "bin/idem " + String.join(" ", args) + " took over " + COMMAND_TIMEOUT);
      }
      return new Result(p.exitValue(), Files.readString(out, UTF_8));
    } finally {
      if (p.isAlive()) {
        p.destroyForcibly();
        p.waitFor(30, TimeUnit.SECONDS);
      }
    }
  }

  /** Writes once the cluster takes writes (a leader elected), within {@link #READY_TIMEOUT}. */
  private void awaitWrite(String servers, String key, String value) throws Exception {
    Result put =
        await(() -> idem("kv", "put", "--servers", servers, "--timeout", "10s", key, value));
    assertThat(put.exit()).as("put %s: %s", key, put.output()).isZero();
  }

  private Result awaitRead(String servers, String key) throws Exception {
    return await(() -> idem("kv", "get", "--servers", servers, "--timeout", "10s", key));
  }

  interface Call {
    Result run() throws Exception;
  }

  private Result await(Call call) throws Exception {
    long deadline = System.nanoTime() + READY_TIMEOUT.toNanos();
    Result last;
    do {
      for (int i = 0; i < 3; i++) {
        assertThat(nodes[i].isAlive())
            .as("%s is running; log:%n%s", ids.get(i), Files.readString(log(i), UTF_8))
            .isTrue();
      }
      last = call.run();
      if (last.exit() == 0 || last.exit() == NOT_FOUND) {
        return last; // the cluster answered
      }
      Thread.sleep(1000);
    } while (System.nanoTime() < deadline);
    throw new AssertionError("no success within " + READY_TIMEOUT + "; last: " + last.output());
  }

  private static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return s.getLocalPort();
    }
  }
}
