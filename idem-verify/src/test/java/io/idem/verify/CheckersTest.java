package io.idem.verify;

import static io.idem.verify.Op.Outcome.FAIL;
import static io.idem.verify.Op.Outcome.INFO;
import static io.idem.verify.Op.Outcome.OK;
import static io.idem.verify.Ops.append;
import static io.idem.verify.Ops.incr;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The list-append and counter checkers, and the history file, each with the faults they must see.
 */
class CheckersTest {
  @TempDir Path dir;

  private static List<Violation.Kind> kinds(List<Violation> v) {
    return v.stream().map(Violation::kind).toList();
  }

  @Test
  void aCleanListHistoryPasses() {
    List<Op> h =
        List.of(
            append("a", "k", 1, 1, OK),
            append("b", "k", 2, 1, OK),
            append("a", "k", 3, 2, OK),
            append("a", "k", 4, 3, INFO), // unknown: may be absent
            append("b", "k", 5, 2, INFO), // unknown: may be present, once
            append("b", "k", 6, 3, FAIL));
    assertThat(ListAppendChecker.check(h, Map.of("k", List.of(2L, 1L, 5L, 3L)))).isEmpty();
  }

  @Test
  void listCheckerFlagsDuplicatesLossesPhantomsFailuresAndFifo() {
    List<Op> h =
        List.of(
            append("a", "k", 1, 1, OK),
            append("a", "k", 2, 2, OK),
            append("a", "k", 3, 3, OK),
            append("b", "k", 4, 1, INFO),
            append("b", "k", 5, 2, FAIL));
    // 4 (unknown) applied twice, 3 missing, 5 failed but present, 9 never appended, 2 before 1.
    List<Violation> v = ListAppendChecker.check(h, Map.of("k", List.of(2L, 1L, 4L, 4L, 5L, 9L)));
    assertThat(kinds(v))
        .containsExactlyInAnyOrder(
            Violation.Kind.DUPLICATE,
            Violation.Kind.LOST,
            Violation.Kind.FAILED_BUT_APPLIED,
            Violation.Kind.PHANTOM,
            Violation.Kind.FIFO);
  }

  @Test
  void listCheckerRefusesAWorkloadThatRepeatsElements() {
    List<Op> h = List.of(append("a", "k", 1, 1, OK), append("b", "k", 1, 1, OK));
    assertThatThrownBy(() -> ListAppendChecker.check(h, Map.of()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("unique");
  }

  @Test
  void counterCheckerBoundsTheFinalValueByAcknowledgedAndUnknownIncrements() {
    List<Op> h =
        List.of(
            incr("a", "n", 1, OK, 1L),
            incr("a", "n", 1, OK, 2L),
            incr("b", "n", 5, INFO, null),
            incr("b", "n", 7, FAIL, null));
    assertThat(CounterChecker.check(h, Map.of("n", 2L))).isEmpty();
    assertThat(CounterChecker.check(h, Map.of("n", 7L))).isEmpty();
    assertThat(kinds(CounterChecker.check(h, Map.of("n", 1L))))
        .containsExactly(Violation.Kind.LOST);
    assertThat(kinds(CounterChecker.check(h, Map.of("n", 8L))))
        .containsExactly(Violation.Kind.DUPLICATE);
  }

  @Test
  void counterCheckerFlagsTwoAcknowledgementsWithOneResult() {
    // Each increment by 1 moves the counter to a value of its own; two acknowledgements of one
    // value mean one answer was handed to two calls, or an increment was lost under another.
    List<Op> h = List.of(incr("a", "n", 1, OK, 2L), incr("b", "n", 1, OK, 2L));
    assertThat(kinds(CounterChecker.check(h, Map.of("n", 2L))))
        .containsExactly(Violation.Kind.DUPLICATE);
  }

  @Test
  void historyFilesRoundTripAndBadLinesAreNamed() throws IOException {
    List<Op> h =
        List.of(
            append("a", "k", 1, 1, OK),
            incr("b", "n", 3, INFO, null),
            Ops.read(null, 1, 2),
            Ops.cas(1, 2, 3, 4, FAIL));
    Path f = dir.resolve("history.jsonl");
    History.write(f, h);
    assertThat(History.read(f)).isEqualTo(h);
    assertThat(History.read(f).get(1).end()).isEqualTo(Long.MAX_VALUE);

    Files.writeString(f, History.line(h.get(0)) + "\n{\"id\": 2, \"bogus\": true}\n");
    assertThatThrownBy(() -> History.read(f))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("line 2");
    Files.writeString(
        f,
        "{\"id\":1,\"process\":\"a\",\"f\":\"APPEND\",\"key\":\"k\",\"value\":1,\"expected\":0,"
            + "\"seq\":1,\"start\":10,\"end\":5,\"outcome\":\"OK\",\"result\":null}\n");
    assertThatThrownBy(() -> History.read(f))
        .isInstanceOf(IOException.class)
        .hasMessageContaining("line 1")
        .hasMessageContaining("before it starts");
  }
}
