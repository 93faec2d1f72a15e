package io.idem.verify;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Lease safety: never two holders of one lease name at overlapping log times.
 *
 * <p>Each acknowledged grant opens a tenure at the log time it was applied (its expiry minus its
 * TTL, exact). The tenure's end is bounded from below by what the holder learned afterwards, up to
 * its next grant of the name:
 *
 * <ul>
 *   <li>an acknowledged revoke: the log time it ended, exact;
 *   <li>a revoke of unknown outcome: the grant's time only (it may have ended any time after);
 *   <li>otherwise (let go, or a renewal found it gone): the latest expiry the holder was told, by
 *       the grant or an acknowledged renewal. Only the holder's session renews or revokes a lease,
 *       and expiry only moves later, so the lease lived at least that long.
 * </ul>
 *
 * <p>A grant applied inside another tenure's lower bound is a violation; two tenures that start at
 * one log time overlap only if both last beyond it (a revoke and the next grant may share an
 * entry). Every bound is one the system must respect, so a flagged overlap is a real one; overlaps
 * hidden by unknown outcomes go unflagged.
 */
public final class LeaseChecker {
  private LeaseChecker() {}

  /** One holder's time with a lease: {@code [from, atLeastUntil)} in log ms. */
  record Tenure(String holder, Op grant, long from, long atLeastUntil) {}

  /** Checks every lease name in {@code history}. */
  public static List<Violation> check(List<Op> history) {
    Map<String, Map<String, List<Op>>> byName = new HashMap<>();
    for (Op op : history) {
      if (op.f() == Op.Fn.GRANT || op.f() == Op.Fn.RENEW || op.f() == Op.Fn.REVOKE) {
        byName
            .computeIfAbsent(op.key(), k -> new HashMap<>())
            .computeIfAbsent(op.process(), p -> new ArrayList<>())
            .add(op);
      }
    }
    List<Violation> out = new ArrayList<>();
    for (Map.Entry<String, Map<String, List<Op>>> name : byName.entrySet()) {
      List<Tenure> tenures = new ArrayList<>();
      for (Map.Entry<String, List<Op>> holder : name.getValue().entrySet()) {
        tenures.addAll(tenures(holder.getKey(), holder.getValue()));
      }
      tenures.sort(Comparator.comparingLong(Tenure::from));
      for (int i = 0; i < tenures.size(); i++) {
        for (int j = i + 1; j < tenures.size(); j++) {
          Tenure a = tenures.get(i);
          Tenure b = tenures.get(j);
          if (b.from() >= a.atLeastUntil()) {
            break; // sorted by start: no later tenure overlaps a
          }
          if (b.atLeastUntil() <= b.from()) {
            continue; // an empty tenure (a revoke of unknown outcome): it proves nothing
          }
          out.add(
              new Violation(
                  Violation.Kind.LEASE,
                  name.getKey(),
                  b.holder()
                      + " was granted it at log time "
                      + b.from()
                      + " (op "
                      + b.grant().id()
                      + ") while "
                      + a.holder()
                      + " held it from "
                      + a.from()
                      + " (op "
                      + a.grant().id()
                      + ") until at least "
                      + a.atLeastUntil()));
        }
      }
    }
    return out;
  }

  /** One holder's tenures of one name, from its operations in the order it issued them. */
  private static List<Tenure> tenures(String holder, List<Op> ops) {
    List<Op> mine = new ArrayList<>(ops);
    mine.sort(Comparator.comparingLong(Op::start).thenComparingLong(Op::id));
    List<Tenure> out = new ArrayList<>();
    Op grant = null;
    long from = 0;
    long until = 0;
    for (Op op : mine) {
      if (op.f() == Op.Fn.GRANT) {
        if (grant != null) {
          out.add(new Tenure(holder, grant, from, until));
          grant = null;
        }
        if (op.outcome() == Op.Outcome.OK) {
          grant = op;
          from = op.result() - op.value();
          until = op.result();
        }
      } else if (grant != null && op.f() == Op.Fn.RENEW && op.outcome() == Op.Outcome.OK) {
        until = Math.max(until, op.result());
      } else if (grant != null && op.f() == Op.Fn.REVOKE) {
        if (op.outcome() == Op.Outcome.OK) {
          until = op.result();
        } else if (op.outcome() == Op.Outcome.INFO) {
          until = from;
        }
        // FAIL: it was gone already; the bound stands
        out.add(new Tenure(holder, grant, from, until));
        grant = null;
      }
    }
    if (grant != null) {
      out.add(new Tenure(holder, grant, from, until));
    }
    return out;
  }
}
