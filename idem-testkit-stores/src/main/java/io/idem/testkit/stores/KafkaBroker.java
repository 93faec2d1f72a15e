package io.idem.testkit.stores;

import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A private Apache Kafka broker for tests: one KRaft node in combined mode ({@code
 * process.roles=broker,controller}, {@code node.id=1}), a PLAINTEXT listener and a controller
 * listener on free loopback ports, its data and log in a temporary directory. It runs as its own
 * {@code java} process (the JDK this JVM runs on) with the jars of {@code idem-kafka-broker}'s
 * {@code target/broker-lib} on its class path, so no Kafka or Scala class is on the caller's.
 *
 * <p>{@link Builder#start()} formats the storage ({@code kafka.tools.StorageTool format}) and
 * starts {@code kafka.Kafka}, then waits until the broker logs {@value #STARTED}: a listening port
 * alone is not a broker that has registered with its controller. {@link #stop()} sends SIGTERM to
 * the PID and, after {@link #STOP_BOUND}, SIGKILL; {@link #kill()} is SIGKILL at once, as a crash;
 * {@link #restart()} starts it again on the same ports and data; {@link #close()} stops it and
 * deletes the directory. A shutdown hook kills a broker still running when this JVM exits, and a
 * watchdog shell ({@code sh}, one per running broker) kills it within about a second of this JVM's
 * death when no hook ran (SIGKILL).
 *
 * <p>Topics are not created automatically ({@code auto.create.topics.enable=false}): tests create
 * them with the Admin client. The internal topics have one replica and one partition.
 *
 * <p>Not thread-safe: one owner starts, kills and stops it.
 */
public final class KafkaBroker implements AutoCloseable {

  /** The system property that names the directory of the broker's jars. */
  public static final String LIB_PROPERTY = "idem.kafka.broker.lib";

  /** The line the broker logs once it has registered and serves clients. */
  public static final String STARTED = "Kafka Server started";

  /** How long a start waits for {@value #STARTED}. */
  public static final Duration START_BOUND = Duration.ofSeconds(90);

  /** How long the storage format may take. */
  public static final Duration FORMAT_BOUND = Duration.ofSeconds(60);

  /** How long {@link #stop()} waits after SIGTERM before SIGKILL, and after SIGKILL. */
  public static final Duration STOP_BOUND = Duration.ofSeconds(20);

  /** The default {@code num.partitions} (of topics created without a count). */
  public static final int DEFAULT_PARTITIONS = 1;

  /** The default maximum heap of the broker process, as for {@code -Xmx}. */
  public static final String DEFAULT_HEAP = "256m";

  private static final String LOG = "broker.log";

  private final Path lib;
  private final Path dir;
  private final int port;
  private final int controllerPort;
  private final String heap;
  private final Map<String, String> properties;
  private Process process;
  private Thread reaper;
  private Process watchdog;

  private KafkaBroker(Builder b, Path lib, Path dir) {
    this.lib = lib;
    this.dir = dir;
    this.port = LocalCluster.freePort();
    int c = LocalCluster.freePort();
    while (c == port) {
      c = LocalCluster.freePort();
    }
    this.controllerPort = c;
    this.heap = b.heap;
    this.properties = serverProperties(b);
  }

  /**
   * A builder with the defaults: {@value #DEFAULT_PARTITIONS} partition, a {@value #DEFAULT_HEAP}
   * heap, the jars where {@link Builder#lib} says.
   */
  public static Builder builder() {
    return new Builder();
  }

  /** Starts a broker with the defaults (see {@link #builder()}). */
  public static KafkaBroker start() {
    return builder().start();
  }

  /** {@code 127.0.0.1:port}, for {@code bootstrap.servers}. */
  public String bootstrapServers() {
    return "127.0.0.1:" + port;
  }

  /** The PLAINTEXT port (the same across restarts). */
  public int port() {
    return port;
  }

  /** The broker's directory: its data ({@code data/}), properties and log. */
  public Path dir() {
    return dir;
  }

  /** The broker's PID. */
  public long pid() {
    if (process == null) {
      throw new IllegalStateException("the broker was never started");
    }
    return process.pid();
  }

  /** Whether the broker process runs. */
  public boolean isRunning() {
    return process != null && process.isAlive();
  }

  /** SIGKILL, as a crash; returns once the PID is gone. */
  public void kill() {
    if (process != null && process.isAlive()) {
      process.destroyForcibly();
      awaitExit(process, STOP_BOUND);
    }
    dropGuards();
  }

  /**
   * A controlled shutdown: SIGTERM, up to {@link #STOP_BOUND}, then SIGKILL; returns once the PID
   * is gone.
   *
   * @throws IllegalStateException if the process outlives SIGKILL
   */
  public void stop() {
    if (process != null && process.isAlive()) {
      process.destroy(); // SIGTERM: Kafka's shutdown hook closes the logs cleanly
      if (!awaitExit(process, STOP_BOUND)) {
        process.destroyForcibly();
        if (!awaitExit(process, STOP_BOUND)) {
          throw new IllegalStateException(
              "kafka broker PID " + process.pid() + " survived SIGKILL");
        }
      }
    }
    dropGuards();
  }

  /**
   * Stops the broker if it runs, and starts it again on the same ports and data directory; returns
   * once it serves clients.
   *
   * @throws IllegalStateException if it does not start within {@link #START_BOUND} (then it is
   *     killed)
   */
  public void restart() {
    stop();
    launch();
  }

  /** Stops the broker and deletes its directory. */
  @Override
  public void close() {
    try {
      stop();
    } finally {
      LocalFiles.deleteTree(dir);
    }
  }

  /** The broker's whole log (kept across restarts), or "" if there is none yet. */
  public String log() {
    try {
      return Files.readString(dir.resolve(LOG), StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  /** The last lines of the broker's log, for failure messages. */
  public String logTail() {
    return tail(dir.resolve(LOG), 40);
  }

  // ---- life cycle ----

  private void format() {
    String clusterId = clusterId();
    run(
        command("kafka.tools.StorageTool", "format", "-t", clusterId, "-c", props().toString()),
        dir.resolve("format.log"),
        FORMAT_BOUND,
        "kafka storage format");
  }

  private void launch() {
    Path log = dir.resolve(LOG);
    long from;
    try {
      from = Files.exists(log) ? Files.size(log) : 0;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    ProcessBuilder pb = new ProcessBuilder(command("kafka.Kafka", props().toString()));
    pb.redirectErrorStream(true);
    pb.redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
    try {
      process = pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + pb.command(), e);
    }
    Process started = process;
    reaper = new Thread(() -> started.destroyForcibly(), "kafka-reaper-" + port);
    Runtime.getRuntime().addShutdownHook(reaper);
    watchdog = watchdog(started);
    awaitStarted(log, from);
  }

  /** Polls the log written since {@code from} for {@value #STARTED}. */
  private void awaitStarted(Path log, long from) {
    long end = System.nanoTime() + START_BOUND.toNanos();
    while (!logSince(log, from).contains(STARTED)) {
      if (!process.isAlive()) {
        int code = process.exitValue();
        dropGuards();
        throw new IllegalStateException(
            "kafka broker exited with " + code + " before it started:\n" + logTail());
      }
      if (System.nanoTime() > end) {
        kill();
        throw new IllegalStateException(
            "kafka broker did not log '" + STARTED + "' within " + START_BOUND + ":\n" + logTail());
      }
      LocalFiles.sleep(50);
    }
  }

  private List<String> command(String mainClass, String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.add("-Xmx" + heap);
    cmd.add("-Xms64m");
    // One GC thread and the C1 compiler only: these start fastest on a small shared machine, and a
    // test broker moves little data.
    cmd.add("-XX:+UseSerialGC");
    cmd.add("-XX:TieredStopAtLevel=1");
    cmd.add("-XX:+ExitOnOutOfMemoryError");
    cmd.add("-Djava.awt.headless=true");
    cmd.add("-Dlog4j2.configurationFile=" + dir.resolve("log4j2.properties"));
    cmd.add("-cp");
    cmd.add(lib + "/*");
    cmd.add(mainClass);
    cmd.addAll(List.of(args));
    return cmd;
  }

  private Path props() {
    return dir.resolve("server.properties");
  }

  private void writeConfig() throws IOException {
    StringBuilder b = new StringBuilder();
    properties.forEach((k, v) -> b.append(k).append('=').append(v).append('\n'));
    Files.writeString(props(), b.toString(), StandardCharsets.UTF_8);
    Files.writeString(
        dir.resolve("log4j2.properties"),
        String.join(
            "\n",
            "status=warn",
            "appender.out.type=Console",
            "appender.out.name=out",
            "appender.out.layout.type=PatternLayout",
            "appender.out.layout.pattern=[%d] %p %m (%c)%n",
            "rootLogger.level=INFO",
            "rootLogger.appenderRef.out.ref=out",
            // Every client and server configuration is dumped at INFO: hundreds of lines each.
            "logger.config.name=org.apache.kafka.common.config.AbstractConfig",
            "logger.config.level=WARN",
            ""),
        StandardCharsets.UTF_8);
  }

  private Map<String, String> serverProperties(Builder b) {
    Map<String, String> p = new LinkedHashMap<>();
    p.put("process.roles", "broker,controller");
    p.put("node.id", "1");
    p.put("controller.quorum.voters", "1@127.0.0.1:" + controllerPort);
    p.put(
        "listeners", "PLAINTEXT://127.0.0.1:" + port + ",CONTROLLER://127.0.0.1:" + controllerPort);
    p.put("advertised.listeners", "PLAINTEXT://127.0.0.1:" + port);
    p.put("controller.listener.names", "CONTROLLER");
    p.put("inter.broker.listener.name", "PLAINTEXT");
    p.put("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT");
    p.put("log.dirs", dir.resolve("data").toString());
    p.put("num.partitions", Integer.toString(b.partitions));
    p.put("auto.create.topics.enable", "false");
    p.put("min.insync.replicas", "1");
    p.put("group.initial.rebalance.delay.ms", "0");
    p.put("offsets.topic.replication.factor", "1");
    p.put("offsets.topic.num.partitions", "1");
    p.put("transaction.state.log.replication.factor", "1");
    p.put("transaction.state.log.min.isr", "1");
    p.put("transaction.state.log.num.partitions", "1");
    p.put("share.coordinator.state.topic.replication.factor", "1");
    p.put("share.coordinator.state.topic.min.isr", "1");
    p.put("num.network.threads", "2");
    p.put("num.io.threads", "2");
    p.putAll(b.extra);
    return p;
  }

  /**
   * A Kafka cluster id: 16 random bytes in URL-safe base64 without padding, as Uuid prints, and not
   * starting with '-' (as Kafka's own Uuid.randomUuid ensures): StorageTool would read such an id
   * as an option, and fail with "argument --cluster-id/-t: expected one argument" (1 start in 64).
   */
  static String clusterId() {
    while (true) {
      UUID u = UUID.randomUUID();
      ByteBuffer buf = ByteBuffer.allocate(16);
      buf.putLong(u.getMostSignificantBits()).putLong(u.getLeastSignificantBits());
      String id = Base64.getUrlEncoder().withoutPadding().encodeToString(buf.array());
      if (!id.startsWith("-")) {
        return id;
      }
    }
  }

  /**
   * A shell that SIGKILLs the broker once this JVM is gone, also when it went by SIGKILL and ran no
   * shutdown hook; it polls once a second and ends by itself when the broker does.
   */
  private Process watchdog(Process broker) {
    long jvm = ProcessHandle.current().pid();
    long pid = broker.pid();
    String script =
        String.format(
            "while kill -0 %d 2>/dev/null && kill -0 %d 2>/dev/null; do sleep 1; done;"
                + " kill -0 %d 2>/dev/null || kill -9 %d 2>/dev/null",
            jvm, pid, jvm, pid);
    try {
      return new ProcessBuilder("sh", "-c", script)
          .redirectErrorStream(true)
          .redirectOutput(ProcessBuilder.Redirect.DISCARD)
          .start();
    } catch (IOException e) {
      broker.destroyForcibly();
      awaitExit(broker, STOP_BOUND);
      dropGuards();
      throw new UncheckedIOException("cannot start the broker's watchdog (sh)", e);
    }
  }

  /** Drops the shutdown hook and stops the watchdog (by its PID), once the broker is gone. */
  private void dropGuards() {
    if (watchdog != null) {
      watchdog.destroyForcibly();
      awaitExit(watchdog, STOP_BOUND);
      watchdog = null;
    }
    if (reaper != null) {
      try {
        Runtime.getRuntime().removeShutdownHook(reaper);
      } catch (IllegalStateException shuttingDown) {
        // the hook runs anyway
      }
      reaper = null;
    }
  }

  // ---- helpers ----

  /**
   * {@value #LIB_PROPERTY}, else the first {@code idem-kafka-broker/target/broker-lib} in the
   * working directory or above it (a module's tests run in the module's directory, beside
   * idem-kafka-broker).
   */
  static Path defaultLib() {
    String p = System.getProperty(LIB_PROPERTY);
    if (p != null && !p.isBlank()) {
      return Path.of(p);
    }
    Path here = Path.of("").toAbsolutePath();
    for (Path d = here; d != null; d = d.getParent()) {
      Path candidate = d.resolve("idem-kafka-broker").resolve("target").resolve("broker-lib");
      if (Files.isDirectory(candidate)) {
        return candidate;
      }
    }
    throw new IllegalStateException(
        "no -D"
            + LIB_PROPERTY
            + " and no idem-kafka-broker/target/broker-lib in "
            + here
            + " or above: build the module idem-kafka-broker (./mvnw install -pl idem-kafka-broker),"
            + " or pass the directory to KafkaBroker.builder().lib()");
  }

  /** The jars' directory: holds kafka_2.13's jar, or the start fails naming where it looked. */
  static Path checkLib(Path lib) {
    boolean ok = false;
    if (Files.isDirectory(lib)) {
      try (Stream<Path> jars = Files.list(lib)) {
        ok = jars.anyMatch(j -> j.getFileName().toString().startsWith("kafka_2.13-"));
      } catch (IOException e) {
        throw new UncheckedIOException("cannot list " + lib, e);
      }
    }
    if (!ok) {
      throw new IllegalStateException(
          "no Kafka broker jars (kafka_2.13-*.jar) in "
              + lib
              + ": build the module idem-kafka-broker first (./mvnw install -pl idem-kafka-broker"
              + " puts them in idem-kafka-broker/target/broker-lib), and pass that directory as -D"
              + LIB_PROPERTY);
    }
    return lib.toAbsolutePath();
  }

  private static String logSince(Path log, long from) {
    try {
      byte[] all = Files.readAllBytes(log);
      int start = (int) Math.min(from, all.length);
      return new String(all, start, all.length - start, StandardCharsets.UTF_8);
    } catch (IOException e) {
      return "";
    }
  }

  private static String tail(Path file, int n) {
    try {
      List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - n), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  private static void run(List<String> cmd, Path log, Duration bound, String what) {
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    try {
      Process p = pb.start();
      if (!awaitExit(p, bound)) {
        p.destroyForcibly();
        awaitExit(p, STOP_BOUND);
        throw new IllegalStateException(what + " did not finish within " + bound);
      }
      if (p.exitValue() != 0) {
        throw new IllegalStateException(
            what + " exited with " + p.exitValue() + ":\n" + tail(log, 40));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + cmd, e);
    }
  }

  private static boolean awaitExit(Process p, Duration bound) {
    try {
      return p.waitFor(bound.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      p.destroyForcibly();
      throw new IllegalStateException("interrupted while waiting for PID " + p.pid(), e);
    }
  }

  /** Settings of a broker to start. Not thread-safe. */
  public static final class Builder {
    private int partitions = DEFAULT_PARTITIONS;
    private String heap = DEFAULT_HEAP;
    private Path lib;
    private final Map<String, String> extra = new LinkedHashMap<>();

    private Builder() {}

    /** {@code num.partitions}: of topics created without a partition count. */
    public Builder partitions(int partitions) {
      if (partitions < 1) {
        throw new IllegalArgumentException("partitions must be at least 1, got " + partitions);
      }
      this.partitions = partitions;
      return this;
    }

    /** The broker's maximum heap, as for {@code -Xmx} (e.g. {@code 256m}). */
    public Builder heap(String heap) {
      if (!heap.matches("\\d+[kKmMgG]?")) {
        throw new IllegalArgumentException("heap must be like 256m, got " + heap);
      }
      this.heap = heap;
      return this;
    }

    /**
     * The directory of the broker's jars; by default the system property {@value #LIB_PROPERTY},
     * else {@code idem-kafka-broker/target/broker-lib} in the working directory or above it.
     */
    public Builder lib(Path lib) {
      this.lib = lib;
      return this;
    }

    /** Any other server property; it overrides the test defaults. */
    public Builder property(String key, String value) {
      extra.put(key, value);
      return this;
    }

    /**
     * Formats a new directory and starts the broker; returns once it serves clients.
     *
     * @throws IllegalStateException if the jars are missing, or the format or the start fails or
     *     times out (the message holds the log's tail; the directory is deleted)
     */
    public KafkaBroker start() {
      Path jars = lib != null ? lib : defaultLib();
      jars = checkLib(jars);
      Path dir;
      try {
        dir = Files.createTempDirectory("idem-kafka-");
      } catch (IOException e) {
        throw new UncheckedIOException("cannot make the broker's directory", e);
      }
      KafkaBroker broker = new KafkaBroker(this, jars, dir);
      try {
        broker.writeConfig();
        broker.format();
        broker.launch();
      } catch (IOException e) {
        broker.close();
        throw new UncheckedIOException("cannot write the broker's configuration", e);
      } catch (RuntimeException | Error e) {
        broker.close(); // the failures above carry the log's tail
        throw e;
      }
      return broker;
    }
  }
}
