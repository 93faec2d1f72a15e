package io.idem.verify;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The campaign's checking of a history: the list-append, counter, lease and register checkers on
 * the operations and the state read at the end. The replicas' convergence, which needs the live
 * nodes, is {@link ClusterWatch#convergence}.
 */
final class Checkers {
  private Checkers() {}

  /** Every checker but the replicas' convergence, on a history and the state read at its end. */
  static List<Violation> judge(List<Op> ops, History.FinalState end, List<String> undecided) {
    List<Violation> violations = new ArrayList<>();
    violations.addAll(ListAppendChecker.check(ops, end.lists()));
    violations.addAll(CounterChecker.check(ops, end.counters()));
    violations.addAll(LeaseChecker.check(ops));
    violations.addAll(RegisterChecker.check(ops, 20_000_000, undecided));
    return violations;
  }

  /**
   * Judges a recorded run again, offline, from its directory ({@code history.jsonl} and {@code
   * final-state.json}): every checker but the replicas' convergence, which needed the live nodes.
   * Registers the linearizability search gave up on go to {@code undecided}.
   */
  static List<Violation> check(Path dir, List<String> undecided) throws IOException {
    return judge(
        History.read(dir.resolve("history.jsonl")),
        History.readFinalState(dir.resolve("final-state.json")),
        undecided);
  }
}
