package io.idem.server;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Lowers the CPU priority of a background thread (the snapshot writer) below the threads that
 * commit entries and answer clients, so that on a busy machine the scheduler runs those first.
 *
 * <p>Java sets no thread priority on Linux unless run as root with {@code
 * -XX:ThreadPriorityPolicy=1}. Linux gives each thread its own nice value, and any user may raise
 * the nice value of their own threads, so the thread finds its id ({@code /proc/thread-self}) and
 * runs {@code renice} on itself. Where that is not possible (no {@code /proc}, no {@code renice}),
 * the thread keeps its priority and this is logged once. Under the keys bench on this machine the
 * writers at nice 0 took a core each while the commits waited (docs/PERFORMANCE.md, tenth sitting).
 */
final class BackgroundPriority {
  private static final Logger LOG = LoggerFactory.getLogger(BackgroundPriority.class);

  /** The nice value asked for: below every thread at the default 0, and never starved outright. */
  static final int NICE = 10;

  private BackgroundPriority() {}

  /**
   * Lowers the calling thread's priority to {@link #NICE}.
   *
   * @return whether its nice value is now above what it was
   */
  static boolean lowerThisThread() {
    Path self = Path.of("/proc/thread-self");
    try {
      if (!Files.isSymbolicLink(self)) {
        LOG.info("no /proc/thread-self: the snapshot writer keeps its priority");
        return false;
      }
      String tid = Files.readSymbolicLink(self).getFileName().toString();
      Path stat = Path.of("/proc/self/task", tid, "stat");
      int before = nice(stat);
      Process renice =
          new ProcessBuilder("renice", "-n", Integer.toString(NICE), "-p", tid)
              .redirectErrorStream(true)
              .start();
      String output = new String(renice.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (!renice.waitFor(10, TimeUnit.SECONDS)) {
        renice.destroyForcibly();
        LOG.info("renice did not finish: the snapshot writer keeps its priority");
        return false;
      }
      int after = nice(stat);
      if (after <= before) {
        LOG.info(
            "renice left the snapshot writer at nice {} (exit {}: {})",
            after,
            renice.exitValue(),
            output.strip());
        return false;
      }
      LOG.debug("snapshot writer thread {} at nice {}", tid, after);
      return true;
    } catch (IOException | RuntimeException e) {
      LOG.info("the snapshot writer keeps its priority: {}", e.toString());
      return false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  /** The nice value in a thread's {@code stat}: the 19th field, counted after the name. */
  static int nice(Path stat) throws IOException {
    String s = Files.readString(stat, StandardCharsets.US_ASCII);
    String[] f = s.substring(s.lastIndexOf(')') + 2).split(" ");
    return Integer.parseInt(f[16]); // fields 3, 4, ... after the name: field 19 is f[16]
  }
}
