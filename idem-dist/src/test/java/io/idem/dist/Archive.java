package io.idem.dist;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/** The distribution archive this build made, and unpacking it. */
final class Archive {
  private Archive() {}

  /** target/idem-VERSION.tar.gz, which the build names in {@code idem.dist.archive}. */
  static Path path() {
    String name = System.getProperty("idem.dist.archive");
    if (name == null) {
      throw new IllegalStateException(
          "idem.dist.archive is not set: run these tests through Maven, after package");
    }
    Path archive = Path.of(name);
    if (!Files.isRegularFile(archive)) {
      throw new IllegalStateException(archive + " does not exist: run `package` first");
    }
    return archive;
  }

  /** Unpacks the archive into {@code dir} with tar (keeping modes), and returns its home. */
  static Path unpack(Path dir) throws IOException, InterruptedException {
    Process tar =
        new ProcessBuilder("tar", "xzf", path().toString(), "-C", dir.toString())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("tar.log").toFile())
            .start();
    if (!tar.waitFor(2, TimeUnit.MINUTES)) {
      tar.destroyForcibly();
      throw new IllegalStateException("tar took over 2 minutes");
    }
    if (tar.exitValue() != 0) {
      throw new IllegalStateException("tar failed: " + Files.readString(dir.resolve("tar.log")));
    }
    Path home = dir.resolve("idem-" + System.getProperty("idem.dist.version"));
    if (!Files.isDirectory(home)) {
      throw new IllegalStateException("the archive has no directory " + home.getFileName());
    }
    return home;
  }
}
