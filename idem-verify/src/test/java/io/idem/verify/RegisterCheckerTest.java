package io.idem.verify;

import static io.idem.verify.Op.Outcome.FAIL;
import static io.idem.verify.Op.Outcome.INFO;
import static io.idem.verify.Op.Outcome.OK;
import static io.idem.verify.Ops.cas;
import static io.idem.verify.Ops.read;
import static io.idem.verify.Ops.write;
import static org.assertj.core.api.Assertions.assertThat;

import io.idem.verify.RegisterChecker.Verdict;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The linearizability search, on hand-made histories and on random ones with known answers. */
class RegisterCheckerTest {
  private static Verdict verdict(Op... ops) {
    return RegisterChecker.verdict(List.of(ops), 1_000_000);
  }

  @Test
  void aReadConcurrentWithAWriteMaySeeIt() {
    assertThat(verdict(write(1, 0, 10, OK), read(1L, 5, 15))).isEqualTo(Verdict.LINEARIZABLE);
    assertThat(verdict(write(1, 0, 10, OK), read(null, 5, 15))).isEqualTo(Verdict.LINEARIZABLE);
  }

  @Test
  void aStaleReadAfterACompletedWriteIsNot() {
    assertThat(verdict(write(1, 0, 1, OK), write(2, 2, 3, OK), read(1L, 4, 5)))
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
  }

  @Test
  void valuesDoNotFlipBackWithoutAWrite() {
    // Two concurrent writes may land in either order, but once both are done the value is fixed.
    assertThat(
            verdict(write(1, 0, 10, OK), write(2, 0, 10, OK), read(1L, 11, 12), read(1L, 13, 14)))
        .isEqualTo(Verdict.LINEARIZABLE);
    assertThat(
            verdict(write(1, 0, 10, OK), write(2, 0, 10, OK), read(1L, 11, 12), read(2L, 13, 14)))
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
    // While a write is in flight, reads may see the old value, then the new, but not back again.
    assertThat(
            verdict(
                write(1, 0, 1, OK),
                write(2, 2, 20, OK),
                read(1L, 3, 4),
                read(2L, 5, 6),
                read(1L, 7, 8)))
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
  }

  @Test
  void anUnknownWriteMayHaveHappenedOnceAtAnyLaterTime() {
    assertThat(verdict(write(1, 0, 0, INFO), read(null, 1, 2), read(1L, 3, 4)))
        .isEqualTo(Verdict.LINEARIZABLE);
    assertThat(verdict(write(1, 0, 0, INFO), read(1L, 1, 2), read(null, 3, 4)))
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
    assertThat(verdict(write(1, 5, 5, INFO), read(1L, 1, 2))).isEqualTo(Verdict.NOT_LINEARIZABLE);
  }

  /**
   * A long register history after a few writes whose answers were lost (a campaign's register had
   * 14 such among 246,647 operations): they are tried only when the operations with answers cannot
   * go on, so they no longer multiply the search. The search took more than 400 million steps on
   * that register before, and gave up on this one within the budget below.
   */
  @Test
  void unknownWritesDoNotMultiplyTheSearch() {
    List<Op> ops = new ArrayList<>();
    for (int i = 0; i < 14; i++) {
      ops.add(write(1_000 + i, i, i, INFO));
    }
    long t = 100;
    for (int i = 0; i < 3_000; i++) {
      ops.add(write(i, t, t + 1, OK));
      ops.add(read((long) i, t + 2, t + 3));
      if (i == 1_500) {
        ops.add(read(1_005L, t + 4, t + 5)); // one of them took effect, late
      }
      t += 10;
    }
    assertThat(RegisterChecker.verdict(ops, 200_000)).isEqualTo(Verdict.LINEARIZABLE);

    // An unknown write takes effect once: its value cannot come back after a later write.
    List<Op> twice = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      twice.add(write(1_000 + i, i, i, INFO));
    }
    twice.add(read(1_001L, 10, 11));
    twice.add(write(7, 12, 13, OK));
    twice.add(read(7L, 14, 15));
    twice.add(read(1_001L, 16, 17));
    assertThat(RegisterChecker.verdict(twice, 1_000_000)).isEqualTo(Verdict.NOT_LINEARIZABLE);
  }

  @Test
  void anUnknownCompareAndSetMayHaveTakenEffectOrNot() {
    assertThat(verdict(write(1, 0, 1, OK), cas(1, 2, 2, 2, INFO), read(2L, 5, 6)))
        .isEqualTo(Verdict.LINEARIZABLE);
    assertThat(verdict(write(1, 0, 1, OK), cas(1, 2, 2, 2, INFO), read(1L, 5, 6)))
        .isEqualTo(Verdict.LINEARIZABLE);
    assertThat(verdict(write(1, 0, 1, OK), cas(5, 2, 2, 2, INFO), read(2L, 5, 6)))
        .as("at the wrong version it cannot have written")
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
  }

  @Test
  void compareAndSetWritesOnlyAtTheExpectedVersion() {
    // write(1) makes version 1; cas(expected version 1 -> 2) then succeeds and makes version 2.
    assertThat(verdict(write(1, 0, 1, OK), cas(1, 2, 2, 3, OK), read(2L, 4, 5)))
        .isEqualTo(Verdict.LINEARIZABLE);
    assertThat(verdict(write(1, 0, 1, OK), cas(1, 2, 2, 3, FAIL)))
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
    assertThat(verdict(write(1, 0, 1, OK), cas(7, 2, 2, 3, OK)))
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
    assertThat(verdict(write(5, 0, 1, OK), write(5, 2, 3, OK), cas(1, 9, 4, 5, OK)))
        .as("the same value written twice is version 2, not 1")
        .isEqualTo(Verdict.NOT_LINEARIZABLE);
    assertThat(verdict(cas(1, 2, 0, 1, FAIL), read(null, 2, 3))).isEqualTo(Verdict.LINEARIZABLE);
    assertThat(verdict(cas(0, 2, 0, 1, OK), read(2L, 2, 3))).isEqualTo(Verdict.LINEARIZABLE);
  }

  @Test
  void theCheckerReportsPerKey() {
    List<Op> h = new ArrayList<>(List.of(write(1, 0, 1, OK), write(2, 2, 3, OK), read(1L, 4, 5)));
    List<String> unknown = new ArrayList<>();
    List<Violation> v = RegisterChecker.check(h, 1_000_000, unknown);
    assertThat(v).extracting(Violation::kind).containsExactly(Violation.Kind.NOT_LINEARIZABLE);
    assertThat(unknown).isEmpty();
  }

  /**
   * Histories made by running a real register: each op takes effect at one instant inside its
   * interval, so they are linearizable; changing one read to a value never written makes them not.
   */
  @Property(tries = 300)
  void historiesOfARealRegisterAreLinearizableAndACorruptedReadIsNot(
      @ForAll @IntRange(min = 1, max = 12) int size, @ForAll long seed) {
    Random r = new Random(seed);
    List<Op> ops = new ArrayList<>();
    Long register = null;
    long version = 0;
    long t = 0;
    int readIndex = -1;
    for (int i = 0; i < size; i++) {
      long point = t += 1 + r.nextInt(3);
      long start = point - r.nextInt(8);
      long end = point + r.nextInt(8);
      int kind = r.nextInt(4);
      Op op;
      if (kind == 1) {
        long v = r.nextInt(3);
        op = write(v, start, end, r.nextInt(6) == 0 ? INFO : OK);
        register = v;
        version++;
      } else if (kind == 2) {
        long expected = r.nextInt((int) version + 2);
        long v = r.nextInt(3);
        boolean matches = version == expected;
        op = cas(expected, v, start, end, matches ? OK : FAIL);
        if (matches) {
          register = v;
          version++;
        }
      } else {
        op = read(register, start, end);
        readIndex = ops.size();
      }
      ops.add(op);
    }
    assertThat(RegisterChecker.verdict(ops, 10_000_000)).isEqualTo(Verdict.LINEARIZABLE);
    if (readIndex >= 0) {
      Op read = ops.get(readIndex);
      ops.set(readIndex, read(99L, read.start(), read.end()));
      assertThat(RegisterChecker.verdict(ops, 10_000_000)).isEqualTo(Verdict.NOT_LINEARIZABLE);
    }
  }
}
