package io.idem.verify;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Judges list-append histories (as in Jepsen's Elle, with unique elements per key) against the
 * lists read at the end: no element twice, every acknowledged append exactly once, an unknown one
 * at most once, a failed one never, nothing nobody appended, and each session's acknowledged
 * appends to a key in the order the session issued them.
 */
public final class ListAppendChecker {
  private ListAppendChecker() {}

  /**
   * Checks the appends of {@code history} against {@code finalLists} (key to elements in list
   * order). Keys no append touched are ignored; a key that was appended to but is absent counts as
   * an empty list.
   */
  public static List<Violation> check(List<Op> history, Map<String, List<Long>> finalLists) {
    List<Violation> out = new ArrayList<>();
    Map<String, Map<Long, Op>> appended = new HashMap<>();
    for (Op op : history) {
      if (op.f() != Op.Fn.APPEND) {
        continue;
      }
      Op earlier = appended.computeIfAbsent(op.key(), k -> new HashMap<>()).put(op.value(), op);
      if (earlier != null) {
        throw new IllegalArgumentException(
            "the workload must append unique elements: "
                + op.value()
                + " is appended to "
                + op.key()
                + " by ops "
                + earlier.id()
                + " and "
                + op.id());
      }
    }
    for (Map.Entry<String, Map<Long, Op>> e : appended.entrySet()) {
      String key = e.getKey();
      List<Long> list = finalLists.getOrDefault(key, List.of());
      Map<Long, Integer> position = new HashMap<>();
      for (int i = 0; i < list.size(); i++) {
        Long element = list.get(i);
        Integer first = position.putIfAbsent(element, i);
        if (first != null) {
          out.add(
              new Violation(
                  Violation.Kind.DUPLICATE,
                  key,
                  "element " + element + " at positions " + first + " and " + i));
        } else if (!e.getValue().containsKey(element)) {
          out.add(
              new Violation(
                  Violation.Kind.PHANTOM, key, "element " + element + " was never appended"));
        }
      }
      for (Op op : e.getValue().values()) {
        boolean present = position.containsKey(op.value());
        if (op.outcome() == Op.Outcome.OK && !present) {
          out.add(
              new Violation(
                  Violation.Kind.LOST,
                  key,
                  "acknowledged append " + op.value() + " (op " + op.id() + ") is missing"));
        } else if (op.outcome() == Op.Outcome.FAIL && present) {
          out.add(
              new Violation(
                  Violation.Kind.FAILED_BUT_APPLIED,
                  key,
                  "append " + op.value() + " (op " + op.id() + ") failed but is in the list"));
        }
      }
      fifo(key, e.getValue().values(), position, out);
    }
    return out;
  }

  /** Each session's acknowledged appends to one key appear in the order of their numbers. */
  private static void fifo(
      String key, Iterable<Op> ops, Map<Long, Integer> position, List<Violation> out) {
    Map<String, List<Op>> bySession = new HashMap<>();
    for (Op op : ops) {
      if (op.outcome() == Op.Outcome.OK && op.seq() > 0 && position.containsKey(op.value())) {
        bySession.computeIfAbsent(op.process(), p -> new ArrayList<>()).add(op);
      }
    }
    for (Map.Entry<String, List<Op>> s : bySession.entrySet()) {
      List<Op> mine = s.getValue();
      mine.sort(Comparator.comparingLong(Op::seq));
      for (int i = 1; i < mine.size(); i++) {
        Op a = mine.get(i - 1);
        Op b = mine.get(i);
        if (position.get(a.value()) > position.get(b.value())) {
          out.add(
              new Violation(
                  Violation.Kind.FIFO,
                  key,
                  s.getKey()
                      + " issued "
                      + a.value()
                      + " (number "
                      + a.seq()
                      + ") before "
                      + b.value()
                      + " (number "
                      + b.seq()
                      + "), the list holds them the other way round"));
        }
      }
    }
  }
}
