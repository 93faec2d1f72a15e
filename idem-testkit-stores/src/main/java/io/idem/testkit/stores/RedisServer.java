package io.idem.testkit.stores;

import io.idem.testkit.LocalCluster;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A private redis-server process for tests, the keys campaign and the bench: on a free loopback
 * port, with its data in a directory of the caller's, no RDB snapshots, and an AOF if asked. It can
 * be killed (SIGKILL) and started again on the same port and directory. Stopped by its PID:
 * SIGTERM, a bounded wait, then SIGKILL. The Debian package {@code redis-server} provides the
 * binary ({@code ./run-tests} installs it); another one can be named. Not thread-safe: one owner
 * starts, kills and stops it.
 */
public final class RedisServer implements AutoCloseable {

  /** How long {@link #start} waits for the first PONG. */
  public static final Duration START_TIMEOUT = Duration.ofSeconds(20);

  /** The binary {@link #start(Path, Aof)} runs: {@code redis-server}, found on the PATH. */
  public static final String DEFAULT_BINARY = "redis-server";

  /**
   * What the AOF does: none, or written and left to the OS to flush, or fsync'ed every second, or
   * before every reply.
   */
  public enum Aof {
    /** {@code --appendonly no}: nothing survives a restart. */
    OFF("no", "everysec"),
    /** {@code --appendonly yes --appendfsync no}: written at once, flushed when the OS decides. */
    NO("yes", "no"),
    /** {@code --appendonly yes --appendfsync everysec}. */
    EVERYSEC("yes", "everysec"),
    /** {@code --appendonly yes --appendfsync always}. */
    ALWAYS("yes", "always");

    private final String appendonly;
    private final String appendfsync;

    Aof(String appendonly, String appendfsync) {
      this.appendonly = appendonly;
      this.appendfsync = appendfsync;
    }

    /**
     * By Redis's own word: {@code always}, {@code everysec} or {@code no} (an AOF with that {@code
     * appendfsync}), or {@code off} (no AOF).
     *
     * @throws IllegalArgumentException for anything else, naming it
     */
    public static Aof named(String name) {
      return switch (name) {
        case "off" -> OFF;
        case "no" -> NO;
        case "everysec" -> EVERYSEC;
        case "always" -> ALWAYS;
        default ->
            throw new IllegalArgumentException(
                "appendfsync must be always, everysec, no or off, got " + name);
      };
    }
  }

  private final String binary;
  private final Path dir;
  private final int port;
  private final Aof aof;
  private final List<String> extraArgs;
  private Process process;

  private RedisServer(String binary, Path dir, int port, Aof aof, List<String> extraArgs) {
    this.binary = binary;
    this.dir = dir;
    this.port = port;
    this.aof = aof;
    this.extraArgs = List.copyOf(extraArgs);
  }

  /**
   * Starts {@value #DEFAULT_BINARY} with its data in {@code dir} on a free port; waits for PING.
   */
  public static RedisServer start(Path dir, Aof aof) {
    return start(DEFAULT_BINARY, dir, aof);
  }

  /**
   * Starts {@code binary} (a path, or a name looked up on the PATH) with its data in {@code dir} on
   * a free port; waits up to {@link #START_TIMEOUT} for PING.
   *
   * @throws IllegalStateException if it cannot be run or does not answer in time (then it is
   *     stopped)
   */
  public static RedisServer start(String binary, Path dir, Aof aof) {
    RedisServer s = new RedisServer(binary, dir, LocalCluster.freePort(), aof, List.of());
    s.launch();
    return s;
  }

  /**
   * Starts {@code binary} on {@code port} with {@code extraArgs} after the usual ones (a node of a
   * {@link RedisCluster}); waits for PING as {@link #start(String, Path, Aof)} does.
   */
  static RedisServer start(String binary, Path dir, int port, Aof aof, List<String> extraArgs) {
    RedisServer s = new RedisServer(binary, dir, port, aof, extraArgs);
    s.launch();
    return s;
  }

  /** {@code redis://127.0.0.1:port}. */
  public String uri() {
    return "redis://127.0.0.1:" + port;
  }

  /** The data directory. */
  public Path dir() {
    return dir;
  }

  /** What the AOF does. */
  public Aof aof() {
    return aof;
  }

  /** The port. */
  public int port() {
    return port;
  }

  /** The PID of the running process. */
  public long pid() {
    return process.pid();
  }

  /** Whether the process is running. */
  public boolean isRunning() {
    return process != null && process.isAlive();
  }

  /** SIGKILL, as a crash: nothing is flushed. Waits until the process is gone. */
  public void kill() {
    if (process != null) {
      process.destroyForcibly();
      await(process, Duration.ofSeconds(10));
    }
  }

  /** Starts the server again on the same port and directory (after {@link #kill} or a stop). */
  public void restart() {
    if (isRunning()) {
      throw new IllegalStateException("redis-server " + pid() + " still runs");
    }
    launch();
  }

  /** Stops it: SIGTERM, up to 10 s, then SIGKILL. */
  @Override
  public void close() {
    if (process != null && process.isAlive()) {
      process.destroy();
      if (!await(process, Duration.ofSeconds(10))) {
        process.destroyForcibly();
        await(process, Duration.ofSeconds(10));
      }
    }
  }

  /** The server's whole log (kept across restarts), or "" if there is none yet. */
  public String log() {
    try {
      return Files.readString(dir.resolve("redis.log"));
    } catch (IOException e) {
      return "";
    }
  }

  /** The last lines of the server's log, for failure messages. */
  public String logTail() {
    try {
      List<String> lines = Files.readAllLines(dir.resolve("redis.log"));
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  private void launch() {
    List<String> cmd = new ArrayList<>();
    cmd.addAll(List.of(binary, "--port", Integer.toString(port), "--bind", "127.0.0.1"));
    cmd.addAll(List.of("--dir", dir.toAbsolutePath().toString(), "--save", ""));
    cmd.addAll(List.of("--logfile", dir.resolve("redis.log").toAbsolutePath().toString()));
    cmd.addAll(List.of("--daemonize", "no", "--databases", "1"));
    cmd.addAll(List.of("--appendonly", aof.appendonly, "--appendfsync", aof.appendfsync));
    cmd.addAll(extraArgs);
    try {
      Files.createDirectories(dir);
      process =
          new ProcessBuilder(cmd)
              .redirectErrorStream(true)
              .redirectOutput(dir.resolve("redis.out").toFile())
              .start();
    } catch (IOException e) {
      throw new IllegalStateException(
          "cannot run "
              + binary
              + " (Debian package redis-server; ./run-tests installs it): "
              + e.getMessage(),
          e);
    }
    long end = System.nanoTime() + START_TIMEOUT.toNanos();
    while (!ping()) {
      if (!process.isAlive() || System.nanoTime() > end) {
        close();
        throw new IllegalStateException(binary + " did not answer PING:\n" + logTail());
      }
      LocalFiles.sleep(20);
    }
  }

  private boolean ping() {
    try (Socket s = new Socket()) {
      s.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 500);
      s.setSoTimeout(1000);
      OutputStream out = s.getOutputStream();
      out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = s.getInputStream();
      byte[] b = new byte[7];
      int n = in.readNBytes(b, 0, 7);
      return new String(b, 0, n, StandardCharsets.US_ASCII).equals("+PONG\r\n");
    } catch (IOException e) {
      return false; // not up yet, or loading its AOF (it answers -LOADING then)
    }
  }

  private static boolean await(Process p, Duration d) {
    try {
      return p.waitFor(d.toMillis(), TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }
}
