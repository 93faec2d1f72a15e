package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Headless Chromium (Debian's package, which ./run-tests installs) for the status page's tests. */
final class Chromium {
  private static final Path BINARY = Path.of("/usr/bin/chromium");

  private Chromium() {}

  /**
   * Runs headless Chromium with {@code args} (a {@code --dump-dom} or {@code --screenshot} of a
   * URL) and a fresh profile under {@code dir}, letting the page's timers run 4 s of virtual time
   * (several polls of {@code /api/status}, a second apart); its standard output.
   */
  static String run(Path dir, String... args) throws Exception {
    assertThat(BINARY)
        .as("headless Chromium (Debian package chromium; ./run-tests installs it)")
        .isExecutable();
    Path profile = Files.createTempDirectory(dir, "chromium");
    List<String> command =
        new ArrayList<>(
            List.of(
                BINARY.toString(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--user-data-dir=" + profile,
                "--virtual-time-budget=4000"));
    command.addAll(List.of(args));
    Path out = Files.createTempFile(dir, "chromium", ".out");
    Process p =
        new ProcessBuilder(command)
            .redirectOutput(out.toFile())
            .redirectError(ProcessBuilder.Redirect.DISCARD)
            .start();
    try {
      assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("chromium finished").isTrue();
      assertThat(p.exitValue()).as("chromium's exit status").isZero();
    } finally {
      p.destroy();
      if (!p.waitFor(5, TimeUnit.SECONDS)) {
        p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
      }
      p.descendants().forEach(ProcessHandle::destroyForcibly);
    }
    return Files.readString(out);
  }
}
