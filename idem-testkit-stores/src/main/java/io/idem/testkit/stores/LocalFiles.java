package io.idem.testkit.stores;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/** What the server launchers of this package share: waiting, and removing a data directory. */
final class LocalFiles {
  private LocalFiles() {}

  /** Sleeps {@code ms}; an interrupt keeps the flag set and ends the wait with an exception. */
  static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted", e);
    }
  }

  /** Deletes {@code root} and everything under it; nothing if it is absent. */
  static void deleteTree(Path root) {
    if (!Files.exists(root)) {
      return;
    }
    try (Stream<Path> all = Files.walk(root)) {
      all.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot delete " + root, e);
    }
  }
}
