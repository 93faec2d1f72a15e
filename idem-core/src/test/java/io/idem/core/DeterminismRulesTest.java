package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The build check behind ARCHITECTURE's determinism rules: idem-core's main code reads no clock,
 * draws no randomness, uses no floating point, and imports nothing outside the JDK.
 */
class DeterminismRulesTest {
  private static final Path MAIN = Path.of("src/main/java");

  private static final Pattern FORBIDDEN =
      Pattern.compile(
          "System\\s*\\.\\s*(currentTimeMillis|nanoTime)"
              + "|\\b(Instant|LocalDateTime|LocalDate|ZonedDateTime|OffsetDateTime|Clock)\\s*\\.\\s*"
              + "(now|system\\w*)\\b"
              + "|\\bnew\\s+(Random|SecureRandom|SplittableRandom)\\b"
              + "|\\b(ThreadLocalRandom|RandomGenerator)\\b"
              + "|\\bMath\\s*\\.\\s*random\\b"
              + "|\\bUUID\\s*\\.\\s*randomUUID\\b"
              + "|\\b(float|double|Float|Double)\\b"
              + "|\\bThread\\s*\\.\\s*sleep\\b");

  private static final Pattern IMPORT = Pattern.compile("^import\\s+(static\\s+)?([\\w.]+)");

  @Test
  void mainCodeReadsNoClockDrawsNoRandomnessAndUsesNoFloatingPoint() throws IOException {
    List<String> hits = new ArrayList<>();
    for (Path file : sources()) {
      List<String> lines = Files.readAllLines(file);
      for (int i = 0; i < lines.size(); i++) {
        String code = stripComment(lines.get(i));
        Matcher m = FORBIDDEN.matcher(code);
        if (m.find()) {
          hits.add(file + ":" + (i + 1) + ": " + m.group());
        }
      }
    }
    assertThat(hits).as("non-deterministic constructs in idem-core main code").isEmpty();
  }

  @Test
  void mainCodeImportsOnlyTheJdk() throws IOException {
    List<String> hits = new ArrayList<>();
    for (Path file : sources()) {
      for (String line : Files.readAllLines(file)) {
        Matcher m = IMPORT.matcher(line.trim());
        if (m.find()) {
          String target = m.group(2);
          if (!target.startsWith("java.") && !target.startsWith("io.idem.core.")) {
            hits.add(file + ": " + target);
          }
        }
      }
    }
    assertThat(hits).as("imports outside the JDK in idem-core main code").isEmpty();
  }

  @Test
  void theScannerCatchesWhatItLooksFor() {
    assertThat(FORBIDDEN.matcher("long t = System.currentTimeMillis();").find()).isTrue();
    assertThat(FORBIDDEN.matcher("var r = new Random(1);").find()).isTrue();
    assertThat(FORBIDDEN.matcher("Instant.now()").find()).isTrue();
    assertThat(FORBIDDEN.matcher("double d = 0;").find()).isTrue();
    assertThat(FORBIDDEN.matcher("long ttlMs = nextSeq;").find()).isFalse();
    assertThat(IMPORT.matcher("import static org.x.Y.z;").find()).isTrue();
  }

  private static List<Path> sources() throws IOException {
    assertThat(MAIN).as("run from the idem-core module directory").isDirectory();
    try (Stream<Path> files = Files.walk(MAIN)) {
      List<Path> list = files.filter(p -> p.toString().endsWith(".java")).toList();
      assertThat(list).isNotEmpty();
      return list;
    }
  }

  private static String stripComment(String line) {
    String t = line.trim();
    if (t.startsWith("*") || t.startsWith("/*") || t.startsWith("//")) {
      return "";
    }
    int c = line.indexOf("//");
    return c >= 0 ? line.substring(0, c) : line;
  }
}
