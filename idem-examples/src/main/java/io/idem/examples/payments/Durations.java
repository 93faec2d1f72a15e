package io.idem.examples.payments;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.Locale;
import java.util.stream.Stream;

/** Small helpers of the payments example: durations like 500ms, 3s, 2m; removing a directory. */
final class Durations {
  private Durations() {}

  /** "500ms", "3s", "2m" or "0". */
  static Duration parse(String text) {
    String v = text.trim().toLowerCase(Locale.ROOT);
    try {
      if (v.equals("0")) {
        return Duration.ZERO;
      }
      if (v.endsWith("ms")) {
        return Duration.ofMillis(Long.parseLong(v.substring(0, v.length() - 2)));
      }
      if (v.endsWith("s")) {
        return Duration.ofSeconds(Long.parseLong(v.substring(0, v.length() - 1)));
      }
      if (v.endsWith("m")) {
        return Duration.ofMinutes(Long.parseLong(v.substring(0, v.length() - 1)));
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw new IllegalArgumentException("'" + text + "' is not a duration like 500ms, 3s or 2m");
  }

  static void deleteTree(Path dir) {
    if (dir == null) {
      return;
    }
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(p);
      }
    } catch (IOException e) {
      System.err.println("payments: could not remove " + dir + ": " + e.getMessage());
    }
  }
}
