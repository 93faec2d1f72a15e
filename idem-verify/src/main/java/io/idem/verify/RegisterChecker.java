package io.idem.verify;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * Linearizability of single-key registers (read, write, compare-and-set), by the Wing-Gong search
 * with Lowe's memoisation (as in Knossos and Porcupine): look for an order of the operations that
 * respects real time (an operation that ended before another began comes first) and the register's
 * semantics. An operation with an unknown outcome may be placed anywhere after its start, or left
 * out. Each key is searched on its own.
 *
 * <p>The register is Idem's key: a value and a version, the number of writes so far (0 while
 * absent). A write sets the value and adds one to the version; a compare-and-set ({@link
 * Op#expected} is the version it expects) writes only at that version, and its FAIL outcome means
 * the version differed; a read sees the value.
 */
public final class RegisterChecker {
  /** Verdict of one key. */
  public enum Verdict {
    LINEARIZABLE,
    NOT_LINEARIZABLE,
    /** The search went past its step budget. */
    UNKNOWN
  }

  private RegisterChecker() {}

  /**
   * The search's step budget per operation of a key, beyond the caller's minimum: a 45-minute
   * campaign's register of 137,624 operations (22 of them with unknown outcomes, which stay
   * candidates to the end) took 106 million steps and kept 20 million memo entries.
   */
  static final long STEPS_PER_OP = 1_000;

  /**
   * Checks every key's register operations; violations for keys with no linearization. Keys whose
   * search exceeds {@code maxSteps}, or {@link #STEPS_PER_OP} times their operations if more, are
   * reported in {@code unknown} (if not null) instead.
   */
  public static List<Violation> check(List<Op> history, long maxSteps, List<String> unknown) {
    Map<String, List<Op>> byKey = new LinkedHashMap<>();
    for (Op op : history) {
      if (relevant(op)) {
        byKey.computeIfAbsent(op.key(), k -> new ArrayList<>()).add(op);
      }
    }
    List<Violation> out = new ArrayList<>();
    for (Map.Entry<String, List<Op>> e : byKey.entrySet()) {
      Verdict v = verdict(e.getValue(), Math.max(maxSteps, STEPS_PER_OP * e.getValue().size()));
      if (v == Verdict.NOT_LINEARIZABLE) {
        out.add(
            new Violation(
                Violation.Kind.NOT_LINEARIZABLE,
                e.getKey(),
                "no order of its " + e.getValue().size() + " operations explains what was seen"));
      } else if (v == Verdict.UNKNOWN && unknown != null) {
        unknown.add(e.getKey());
      }
    }
    return out;
  }

  /** Operations that carry information about a register. */
  private static boolean relevant(Op op) {
    return switch (op.f()) {
      case READ -> op.outcome() == Op.Outcome.OK;
      case WRITE -> op.outcome() != Op.Outcome.FAIL;
      case CAS -> true;
      default -> false;
    };
  }

  /** The verdict for the register operations of one key (the register starts absent). */
  public static Verdict verdict(List<Op> ops, long maxSteps) {
    int n = ops.size();
    // Events: a call per op, a return per op with a known outcome; sorted by time, calls first
    // on ties (an op ending exactly when another starts counts as concurrent with it).
    List<long[]> events = new ArrayList<>(); // {time, 0 = call / 1 = return, op}
    for (int i = 0; i < n; i++) {
      Op op = ops.get(i);
      events.add(new long[] {op.start(), 0, i});
      if (op.end() != Long.MAX_VALUE) {
        events.add(new long[] {op.end(), 1, i});
      }
    }
    events.sort((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
    int m = events.size();
    int[] next = new int[m + 1];
    int[] prev = new int[m + 1];
    int head = m; // sentinel
    int[] callOf = new int[n];
    int[] returnOf = new int[n];
    java.util.Arrays.fill(returnOf, -1);
    int returns = 0;
    for (int i = 0; i < m; i++) {
      prev[i] = i == 0 ? head : i - 1;
      next[i] = i == m - 1 ? -1 : i + 1;
      int op = (int) events.get(i)[2];
      if (events.get(i)[1] == 0) {
        callOf[op] = i;
      } else {
        returnOf[op] = i;
        returns++;
      }
    }
    next[head] = m == 0 ? -1 : 0;

    // The set of linearized operations, as two 64-bit Zobrist hashes (a random pair per
    // operation, XORed in and out): see Memo.
    SplittableRandom random = new SplittableRandom(n);
    long[] z1 = new long[n];
    long[] z2 = new long[n];
    for (int i = 0; i < n; i++) {
      z1[i] = random.nextLong();
      z2[i] = random.nextLong();
    }
    long h1 = 0;
    long h2 = 0;
    Set<Memo> seen = new HashSet<>();
    int[] stackCall = new int[n];
    boolean[] stackDeferred = new boolean[n];
    Register[] stackState = new Register[n];
    int depth = 0;
    Register state = Register.ABSENT;
    int entry = next[head];
    // Operations with an unknown outcome (no return) are tried last: first every operation with a
    // return whose call comes before the first pending return, then (deferred) the unknown ones
    // there, then back off. Each configuration still tries all its candidates, so the verdict is
    // the same; but an unknown write that never took effect is no longer linearized on trial at
    // every later step, which made a run's 14 unknown operations cost more than 400 million steps.
    boolean deferred = false;
    long steps = 0;
    while (returns > 0) {
      if (++steps > maxSteps) {
        return Verdict.UNKNOWN;
      }
      if (entry == -1) {
        return Verdict.NOT_LINEARIZABLE; // cannot happen: a return ends every pass; kept safe
      }
      long[] ev = events.get(entry);
      int op = (int) ev[2];
      if (ev[1] == 0) {
        boolean unknown = returnOf[op] < 0;
        if (unknown == deferred) {
          Step s = step(ops.get(op), state);
          // An unknown operation that changes nothing is the same as one that never took effect,
          // which the configuration without it covers.
          boolean useful = s.legal() && (!unknown || !s.state().equals(state));
          if (useful) {
            long k1 = h1 ^ z1[op];
            long k2 = h2 ^ z2[op];
            if (seen.add(new Memo(k1, k2, s.state()))) {
              h1 = k1;
              h2 = k2;
              stackCall[depth] = entry;
              stackDeferred[depth] = deferred;
              stackState[depth] = state;
              depth++;
              state = s.state();
              lift(entry, returnOf[op], next, prev);
              if (returnOf[op] >= 0) {
                returns--;
              }
              deferred = false;
              entry = next[head];
              continue;
            }
          }
        }
        entry = next[entry];
      } else if (!deferred) {
        // The first pending return: the operations with returns are exhausted; now the unknown
        // ones whose calls come before it.
        deferred = true;
        entry = next[head];
      } else {
        // Every candidate failed: everything linearized since must be undone.
        if (depth == 0) {
          return Verdict.NOT_LINEARIZABLE;
        }
        depth--;
        int call = stackCall[depth];
        int undone = (int) events.get(call)[2];
        state = stackState[depth];
        deferred = stackDeferred[depth];
        h1 ^= z1[undone];
        h2 ^= z2[undone];
        unlift(call, returnOf[undone], next, prev);
        if (returnOf[undone] >= 0) {
          returns++;
        }
        entry = next[call];
      }
    }
    return Verdict.LINEARIZABLE;
  }

  /**
   * A configuration already explored (Lowe's memoisation): the set of operations linearized so far,
   * as two independent 64-bit Zobrist hashes of it, and the register's state. A copy of the set's
   * bits per configuration made the memo grow with the square of a key's operations (a 45-minute
   * campaign's check ran out of a 12 GB heap); the hashes take 16 bytes. Two different sets with
   * equal 128-bit hashes are improbable beyond concern (about steps squared over 2^129), and if
   * they came, the search would skip a configuration it had not explored: it could then miss a
   * linearization and report NOT_LINEARIZABLE wrongly, never the reverse, so a pass stays a proof.
   */
  private record Memo(long h1, long h2, Register state) {}

  /** A register's state: its value (null while absent) and its version. */
  private record Register(Long value, long version) {
    static final Register ABSENT = new Register(null, 0);

    Register write(long v) {
      return new Register(v, version + 1);
    }
  }

  private record Step(boolean legal, Register state) {}

  /** Applies {@code op} to {@code current}. */
  private static Step step(Op op, Register current) {
    return switch (op.f()) {
      case WRITE -> new Step(true, current.write(op.value()));
      case READ -> new Step(Objects.equals(current.value(), op.result()), current);
      case CAS -> {
        boolean matches = current.version() == op.expected();
        Register after = matches ? current.write(op.value()) : current;
        yield switch (op.outcome()) {
          case OK -> new Step(matches, after);
          case FAIL -> new Step(!matches, current);
          case INFO -> new Step(true, after);
        };
      }
      default -> throw new IllegalArgumentException("not a register operation: " + op);
    };
  }

  private static void lift(int call, int ret, int[] next, int[] prev) {
    remove(call, next, prev);
    if (ret >= 0) {
      remove(ret, next, prev);
    }
  }

  private static void unlift(int call, int ret, int[] next, int[] prev) {
    if (ret >= 0) {
      restore(ret, next, prev);
    }
    restore(call, next, prev);
  }

  private static void remove(int i, int[] next, int[] prev) {
    next[prev[i]] = next[i];
    if (next[i] >= 0) {
      prev[next[i]] = prev[i];
    }
  }

  private static void restore(int i, int[] next, int[] prev) {
    next[prev[i]] = i;
    if (next[i] >= 0) {
      prev[next[i]] = i;
    }
  }
}
