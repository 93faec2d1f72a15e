package io.idem.verify;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Judges counter histories (increments by positive deltas) against the counters read at the end:
 * the final value is at least the sum of the acknowledged increments (none lost) and at most that
 * plus the unknown ones (none applied twice), and no two acknowledged increments of one counter saw
 * the same result (each increment moved the counter on its own).
 */
public final class CounterChecker {
  private CounterChecker() {}

  /** Checks the increments of {@code history} against {@code finalCounters} (absent = 0). */
  public static List<Violation> check(List<Op> history, Map<String, Long> finalCounters) {
    Map<String, long[]> sums = new HashMap<>(); // key -> {ok, unknown}
    Map<String, Map<Long, Op>> results = new HashMap<>();
    List<Violation> out = new ArrayList<>();
    for (Op op : history) {
      if (op.f() != Op.Fn.INCR) {
        continue;
      }
      if (op.value() <= 0) {
        throw new IllegalArgumentException(
            "the counter workload increments by positive deltas; op "
                + op.id()
                + " adds "
                + op.value());
      }
      long[] s = sums.computeIfAbsent(op.key(), k -> new long[2]);
      if (op.outcome() == Op.Outcome.OK) {
        s[0] += op.value();
        if (op.result() != null) {
          Op same = results.computeIfAbsent(op.key(), k -> new HashMap<>()).put(op.result(), op);
          if (same != null) {
            out.add(
                new Violation(
                    Violation.Kind.DUPLICATE,
                    op.key(),
                    "ops " + same.id() + " and " + op.id() + " both answered " + op.result()));
          }
        }
      } else if (op.outcome() == Op.Outcome.INFO) {
        s[1] += op.value();
      }
    }
    for (Map.Entry<String, long[]> e : sums.entrySet()) {
      long ok = e.getValue()[0];
      long unknown = e.getValue()[1];
      long actual = finalCounters.getOrDefault(e.getKey(), 0L);
      if (actual < ok) {
        out.add(
            new Violation(
                Violation.Kind.LOST,
                e.getKey(),
                "counter is " + actual + " but acknowledged increments add up to " + ok));
      } else if (actual > ok + unknown) {
        out.add(
            new Violation(
                Violation.Kind.DUPLICATE,
                e.getKey(),
                "counter is "
                    + actual
                    + ", more than the acknowledged "
                    + ok
                    + " plus the unknown "
                    + unknown));
      }
    }
    return out;
  }
}
