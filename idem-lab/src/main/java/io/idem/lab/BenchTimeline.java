package io.idem.lab;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Locale;
import org.HdrHistogram.Histogram;

/** The per-second lines of {@code --timeline}, or nothing when the option is not given. */
final class BenchTimeline implements AutoCloseable {
  private final BufferedWriter out;

  private BenchTimeline(BufferedWriter out) {
    this.out = out;
  }

  static BenchTimeline open(Path file, String run) {
    if (file == null) {
      return new BenchTimeline(null);
    }
    try {
      BufferedWriter w =
          Files.newBufferedWriter(
              file, StandardCharsets.UTF_8, StandardOpenOption.CREATE, StandardOpenOption.APPEND);
      w.write("# " + run + ", started " + Instant.now() + "\n");
      w.write("time,ops,p50_ms,p99_ms,max_ms\n");
      w.flush();
      return new BenchTimeline(w);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the timeline " + file, e);
    }
  }

  /** One line for the operations that completed in the second that just ended. */
  void write(Histogram second) {
    if (out == null) {
      return;
    }
    try {
      out.write(
          String.format(
              Locale.ROOT,
              "%s,%d,%.3f,%.3f,%.3f\n",
              Instant.now().truncatedTo(ChronoUnit.MILLIS),
              second.getTotalCount(),
              BenchRun.ms(second, 50),
              BenchRun.ms(second, 99),
              second.getTotalCount() == 0 ? 0 : second.getMaxValue() / 1000.0));
      out.flush();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the timeline", e);
    }
  }

  @Override
  public void close() {
    if (out != null) {
      try {
        out.close();
      } catch (IOException e) {
        throw new UncheckedIOException("cannot close the timeline", e);
      }
    }
  }
}
