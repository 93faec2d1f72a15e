package io.idem.testkit.stores;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.GroupPrincipal;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.UserPrincipal;
import java.nio.file.attribute.UserPrincipalLookupService;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A private PostgreSQL server for tests: a new cluster in a temporary directory (initdb), one
 * {@code postgres} process on a free loopback port with its socket in that directory, a database
 * {@value #DATABASE}, and trust authentication for the superuser {@value #USER} on 127.0.0.1 only.
 * PostgreSQL refuses to run as root, so under root both run as the unprivileged user {@code
 * postgres} (the Debian package creates it), through {@code setpriv}, which execs, so the process
 * this starts is the postmaster itself.
 *
 * <p>{@link #crash()} is an immediate shutdown (SIGQUIT: no checkpoint, recovery from the WAL at
 * the next start), {@link #start()} starts it again on the same directory and port, and {@link
 * #close()} stops it (SIGINT, a fast shutdown, then SIGKILL after 10 s) by its PID, waits until the
 * PID is gone, and deletes the directory.
 *
 * <p>Binaries: {@code $IDEM_PG_BIN}, else {@code pg_config --bindir}, else the newest {@code
 * /usr/lib/postgresql/<version>/bin} that has {@code initdb} and {@code postgres}.
 */
public final class PostgresServer implements AutoCloseable {
  /** The database the server creates, which {@link #jdbcUrl} names. */
  public static final String DATABASE = "idem";

  /** The superuser, trusted on 127.0.0.1 without a password. */
  public static final String USER = "postgres";

  /** The server's {@code max_connections}, unless a setting given to {@link #create} changes it. */
  public static final int MAX_CONNECTIONS = 200;

  private static final Duration READY_BOUND = Duration.ofSeconds(60);
  private static final Duration STOP_BOUND = Duration.ofSeconds(10);

  /**
   * Durability of the server. {@code FAST} turns fsync and full-page writes off: a crash of the
   * server process still loses nothing committed (the operating system keeps the writes), a crash
   * of the machine would. {@code DURABLE} keeps PostgreSQL's defaults (fsync on).
   */
  public enum Durability {
    FAST,
    DURABLE
  }

  private final Path dir;
  private final Path bin;
  private final int port;
  private final Durability durability;
  private final List<String> extraSettings;
  private Process process;
  private Thread reaper;

  private PostgresServer(
      Path dir, Path bin, int port, Durability durability, List<String> extraSettings) {
    this.dir = dir;
    this.bin = bin;
    this.port = port;
    this.durability = durability;
    this.extraSettings = extraSettings;
  }

  /** Creates a cluster and starts it, fsync off. */
  public static PostgresServer startFast() {
    return create(Durability.FAST, List.of());
  }

  /**
   * Creates a cluster and starts it with {@code settings} ({@code name=value}, each passed as
   * {@code -c}).
   */
  public static PostgresServer create(Durability durability, List<String> settings) {
    Path bin = binaries();
    Path dir;
    try {
      dir = Files.createTempDirectory("idem-pg-");
      Files.createDirectories(dir.resolve("socket"));
      if (isRoot()) {
        giveTo(dir, USER);
        giveTo(dir.resolve("socket"), USER);
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot make the server's directory", e);
    }
    PostgresServer server =
        new PostgresServer(dir, bin, LocalCluster.freePort(), durability, settings);
    try {
      server.initdb();
      server.start();
      server.createDatabase();
    } catch (RuntimeException | Error e) {
      server.close();
      throw e;
    }
    return server;
  }

  /** The JDBC URL of the test database. */
  public String jdbcUrl() {
    return "jdbc:postgresql://127.0.0.1:" + port + "/" + DATABASE;
  }

  /** The port it listens on (127.0.0.1). */
  public int port() {
    return port;
  }

  /** How it was started, for reports: durability and extra settings. */
  public String describe() {
    return "PostgreSQL at 127.0.0.1:"
        + port
        + " ("
        + (durability == Durability.FAST ? "fsync=off full_page_writes=off" : "fsync=on")
        + (extraSettings.isEmpty() ? "" : " " + String.join(" ", extraSettings))
        + ")";
  }

  /** The postmaster's PID, while it runs. */
  public long pid() {
    return process.pid();
  }

  /** A HikariCP pool on the test database; connection waits bounded by {@code waitMs}. */
  public HikariDataSource pool(int size, long waitMs) {
    HikariConfig c = new HikariConfig();
    c.setJdbcUrl(jdbcUrl());
    c.setUsername(USER);
    c.setMaximumPoolSize(size);
    c.setMinimumIdle(size);
    c.setConnectionTimeout(Math.max(250, waitMs));
    c.setInitializationFailTimeout(-1); // a pool may be built while the server is down
    c.setPoolName("pg-" + port + "-" + size);
    // A server that stops answering (not one that closes the connection) is noticed in 30 s.
    c.addDataSourceProperty("socketTimeout", "30");
    c.addDataSourceProperty("connectTimeout", "5");
    return new HikariDataSource(c);
  }

  /** A new plain connection to the test database (not pooled). */
  public Connection connect() throws SQLException {
    return connect(DATABASE);
  }

  private Connection connect(String database) throws SQLException {
    Properties p = new Properties();
    p.setProperty("user", USER);
    p.setProperty("connectTimeout", "5");
    p.setProperty("socketTimeout", "30");
    return DriverManager.getConnection("jdbc:postgresql://127.0.0.1:" + port + "/" + database, p);
  }

  // ---- life cycle ----

  private void initdb() {
    Path log = dir.resolve("initdb.log");
    List<String> cmd =
        asServerUser(
            List.of(
                bin.resolve("initdb").toString(),
                "-D",
                dir.resolve("data").toString(),
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync")); // the cluster is thrown away after the test
    run(cmd, log, Duration.ofSeconds(120), "initdb");
  }

  /** Starts the server (again) on its directory and port, and waits until it takes connections. */
  public void start() {
    if (process != null && process.isAlive()) {
      throw new IllegalStateException("already running as PID " + process.pid());
    }
    List<String> cmd = new ArrayList<>();
    cmd.add(bin.resolve("postgres").toString());
    cmd.addAll(List.of("-D", dir.resolve("data").toString()));
    cmd.addAll(List.of("-p", Integer.toString(port)));
    cmd.addAll(List.of("-k", dir.resolve("socket").toString()));
    List<String> settings = new ArrayList<>();
    settings.add("listen_addresses=127.0.0.1");
    settings.add("max_connections=" + MAX_CONNECTIONS);
    if (durability == Durability.FAST) {
      settings.add("fsync=off");
      settings.add("full_page_writes=off");
    }
    settings.addAll(extraSettings);
    for (String s : settings) {
      cmd.add("-c");
      cmd.add(s);
    }
    ProcessBuilder pb = new ProcessBuilder(asServerUser(cmd));
    pb.redirectErrorStream(true);
    pb.redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("postgres.log").toFile()));
    try {
      process = pb.start();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start " + cmd, e);
    }
    Process started = process;
    reaper = new Thread(() -> kill(started), "pg-reaper-" + port);
    Runtime.getRuntime().addShutdownHook(reaper);
    awaitReady();
  }

  private void awaitReady() {
    long end = System.nanoTime() + READY_BOUND.toNanos();
    SQLException last = null;
    while (System.nanoTime() < end) {
      if (!process.isAlive()) {
        throw new IllegalStateException(
            "postgres exited with " + process.exitValue() + ":\n" + logTail());
      }
      try (Connection c = connect("postgres")) {
        if (c.isValid(5)) {
          return;
        }
      } catch (SQLException e) {
        last = e;
      }
      LocalFiles.sleep(100);
    }
    throw new IllegalStateException(
        "postgres did not take connections within " + READY_BOUND + ":\n" + logTail(), last);
  }

  private void createDatabase() {
    try (Connection c = connect("postgres");
        Statement s = c.createStatement()) {
      s.execute("CREATE DATABASE " + DATABASE);
    } catch (SQLException e) {
      throw new IllegalStateException("cannot create the test database", e);
    }
  }

  /**
   * An immediate shutdown, as {@code pg_ctl stop -m immediate} does (SIGQUIT to the postmaster):
   * every connection drops at once, and the next {@link #start()} recovers from the WAL. Returns
   * once the PID is gone.
   */
  public void crash() {
    stop("QUIT");
  }

  /** A fast shutdown (SIGINT); returns once the PID is gone. */
  public void stop() {
    stop("INT");
  }

  private void stop(String signal) {
    if (process == null || !process.isAlive()) {
      return;
    }
    signal(process.pid(), signal);
    try {
      if (!process.waitFor(STOP_BOUND.toMillis(), TimeUnit.MILLISECONDS)) {
        process.destroyForcibly();
        if (!process.waitFor(STOP_BOUND.toMillis(), TimeUnit.MILLISECONDS)) {
          throw new IllegalStateException("postgres PID " + process.pid() + " survived SIGKILL");
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      process.destroyForcibly();
      throw new IllegalStateException("interrupted while stopping postgres", e);
    }
    forgetReaper();
  }

  /** Stops the server and deletes its directory. */
  @Override
  public void close() {
    try {
      stop();
    } finally {
      LocalFiles.deleteTree(dir);
    }
  }

  /** The last lines of the server's log, for failure messages. */
  public String logTail() {
    try {
      List<String> lines = Files.readAllLines(dir.resolve("postgres.log"), StandardCharsets.UTF_8);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  private void forgetReaper() {
    if (reaper != null) {
      try {
        Runtime.getRuntime().removeShutdownHook(reaper);
      } catch (IllegalStateException shuttingDown) {
        // the hook runs anyway
      }
      reaper = null;
    }
  }

  private static void kill(Process p) {
    if (p.isAlive()) {
      p.destroyForcibly();
    }
  }

  // ---- helpers ----

  private static boolean isRoot() {
    return "root".equals(System.getProperty("user.name"));
  }

  /** {@code cmd} as the unprivileged server user when this JVM runs as root. */
  private static List<String> asServerUser(List<String> cmd) {
    if (!isRoot()) {
      return cmd;
    }
    List<String> out =
        new ArrayList<>(
            List.of("setpriv", "--reuid=" + USER, "--regid=" + USER, "--clear-groups", "--"));
    out.addAll(cmd);
    return out;
  }

  private static void giveTo(Path p, String user) throws IOException {
    UserPrincipalLookupService users = p.getFileSystem().getUserPrincipalLookupService();
    UserPrincipal owner;
    GroupPrincipal group;
    try {
      owner = users.lookupPrincipalByName(user);
      group = users.lookupPrincipalByGroupName(user);
    } catch (IOException e) {
      throw new IllegalStateException(
          "running as root, the server needs the unprivileged user '"
              + user
              + "' (the Debian package postgresql creates it)",
          e);
    }
    PosixFileAttributeView view = Files.getFileAttributeView(p, PosixFileAttributeView.class);
    view.setOwner(owner);
    view.setGroup(group);
  }

  private static void run(List<String> cmd, Path log, Duration bound, String what) {
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectErrorStream(true);
    pb.redirectOutput(log.toFile());
    try {
      Process p = pb.start();
      if (!p.waitFor(bound.toMillis(), TimeUnit.MILLISECONDS)) {
        p.destroyForcibly();
        p.waitFor(STOP_BOUND.toMillis(), TimeUnit.MILLISECONDS);
        throw new IllegalStateException(what + " did not finish within " + bound);
      }
      if (p.exitValue() != 0) {
        throw new IllegalStateException(
            what + " exited with " + p.exitValue() + ":\n" + Files.readString(log));
      }
    } catch (IOException e) {
      throw new UncheckedIOException("cannot run " + cmd, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while running " + what, e);
    }
  }

  private static void signal(long pid, String signal) {
    run(
        List.of("kill", "-s", signal, Long.toString(pid)),
        Path.of("/dev/null"),
        STOP_BOUND,
        "kill -s " + signal);
  }

  /** Where initdb and postgres are. */
  static Path binaries() {
    List<Path> candidates = new ArrayList<>();
    String env = System.getenv("IDEM_PG_BIN");
    if (env != null && !env.isBlank()) {
      candidates.add(Path.of(env));
    }
    pgConfigBindir().ifPresent(candidates::add);
    Path lib = Path.of("/usr/lib/postgresql");
    if (Files.isDirectory(lib)) {
      try (Stream<Path> versions = Files.list(lib)) {
        versions
            .filter(v -> v.getFileName().toString().matches("\\d+"))
            .sorted(
                Comparator.comparingInt((Path v) -> Integer.parseInt(v.getFileName().toString()))
                    .reversed())
            .map(v -> v.resolve("bin"))
            .forEach(candidates::add);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }
    for (Path c : candidates) {
      if (Files.isExecutable(c.resolve("initdb")) && Files.isExecutable(c.resolve("postgres"))) {
        return c;
      }
    }
    throw new IllegalStateException(
        "no PostgreSQL server binaries (initdb, postgres) in "
            + candidates
            + ": install the Debian package postgresql (./run-tests does), or set IDEM_PG_BIN");
  }

  private static Optional<Path> pgConfigBindir() {
    try {
      Process p = new ProcessBuilder("pg_config", "--bindir").redirectErrorStream(true).start();
      String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      if (p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0 && !out.isEmpty()) {
        return Optional.of(Path.of(out));
      }
      p.destroyForcibly();
    } catch (IOException e) {
      // no pg_config on this machine
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return Optional.empty();
  }
}
