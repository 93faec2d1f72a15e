package io.idem.verify;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A recorded history as JSON lines: one {@link Op} per line, kept so that a run can be checked
 * again offline. A line that does not parse is an error naming its line number, never skipped.
 */
public final class History {
  private static final ObjectMapper JSON =
      new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);

  private History() {}

  /**
   * What the clients read at the end of a run: the lists and the counters, kept next to the history
   * ({@code final-state.json}) so that the run can be judged again offline.
   */
  public record FinalState(Map<String, List<Long>> lists, Map<String, Long> counters) {}

  /** Writes {@code state} as JSON. */
  public static void writeFinalState(Path file, FinalState state) throws IOException {
    JSON.writerWithDefaultPrettyPrinter().writeValue(file.toFile(), state);
  }

  /**
   * Reads a state written by {@link #writeFinalState}.
   *
   * @throws IOException if it is missing or not such a state
   */
  public static FinalState readFinalState(Path file) throws IOException {
    try {
      FinalState f = JSON.readValue(file.toFile(), FinalState.class);
      if (f.lists() == null || f.counters() == null) {
        throw new IOException(file + " lacks lists or counters");
      }
      return f;
    } catch (JsonProcessingException e) {
      throw new IOException(file + " is not a final state: " + e.getOriginalMessage(), e);
    }
  }

  /** One line of JSON for {@code op}. */
  public static String line(Op op) {
    try {
      return JSON.writeValueAsString(op);
    } catch (JsonProcessingException e) {
      throw new IllegalStateException("an Op always serialises", e);
    }
  }

  /** Writes {@code ops} to {@code file}, one per line. */
  public static void write(Path file, List<Op> ops) throws IOException {
    try (BufferedWriter w = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
      for (Op op : ops) {
        w.write(line(op));
        w.newLine();
      }
    }
  }

  /**
   * Reads a history written by {@link #write}.
   *
   * @throws IOException naming the first line that is not an operation
   */
  public static List<Op> read(Path file) throws IOException {
    List<Op> ops = new ArrayList<>();
    try (BufferedReader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
      String s;
      int n = 0;
      while ((s = r.readLine()) != null) {
        n++;
        if (s.isBlank()) {
          continue;
        }
        try {
          ops.add(JSON.readValue(s, Op.class));
        } catch (JsonProcessingException | IllegalArgumentException e) {
          throw new IOException(
              file
                  + " line "
                  + n
                  + " is not an operation: "
                  + (e instanceof JsonProcessingException j
                      ? j.getOriginalMessage()
                      : e.getMessage()),
              e);
        }
      }
    }
    return ops;
  }

  /**
   * Reads the journal of a client process ({@link ClientWorker}): each operation is a line written
   * before it was sent (outcome INFO), then, once the process learned the outcome, a line with the
   * same id. Returns the latest line per id, in id order. A last line without its newline was torn
   * by a kill -9 and is dropped; any other line that does not parse is an error.
   */
  public static List<Op> readJournal(Path file) throws IOException {
    if (!Files.exists(file)) {
      return List.of();
    }
    String text = Files.readString(file, StandardCharsets.UTF_8);
    boolean torn = !text.isEmpty() && !text.endsWith("\n");
    String[] lines = text.split("\n");
    java.util.TreeMap<Long, Op> latest = new java.util.TreeMap<>();
    for (int n = 0; n < lines.length; n++) {
      if (lines[n].isBlank() || (torn && n == lines.length - 1)) {
        continue;
      }
      Op op;
      try {
        op = JSON.readValue(lines[n], Op.class);
      } catch (JsonProcessingException | IllegalArgumentException e) {
        throw new IOException(file + " line " + (n + 1) + " is not an operation", e);
      }
      Op before = latest.get(op.id());
      if (before == null || before.outcome() == Op.Outcome.INFO) {
        latest.put(op.id(), op);
      }
    }
    return new ArrayList<>(latest.values());
  }
}
