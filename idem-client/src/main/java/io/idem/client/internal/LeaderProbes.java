package io.idem.client.internal;

import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The bookkeeping of a session's failover probes ({@link SessionMachine}, "Failover probes"): the
 * round in flight, when the last one left, and the highest term heard of. The machine decides when
 * waiting calls call for a probe and what to do with its answer; this decides whether a round may
 * leave now and which answer, if any, is to be believed. No I/O, time as an argument.
 */
final class LeaderProbes {
  private final long probeNanos;
  private long round;
  private boolean probing;
  private boolean probedBefore;
  private long lastAt;
  private long highestTerm = -1;

  /**
   * @param probeNanos the probe interval: also a round's deadline
   */
  LeaderProbes(long probeNanos) {
    this.probeNanos = probeNanos;
  }

  /**
   * Starts a round at {@code now} and returns its number, or 0 if none may leave: one is in flight,
   * or the last left less than {@link SessionMachine#PROBE_REPEAT_NANOS} ago (at most the
   * interval).
   */
  long startRound(long now) {
    // A round is answered within its deadline (the interval); one not answered in twice that is
    // taken as lost, so that a lost report never stops the probes.
    boolean inFlight = probing && now - lastAt < 2 * probeNanos;
    long pace = Math.min(SessionMachine.PROBE_REPEAT_NANOS, probeNanos);
    if (inFlight || (probedBefore && now - lastAt < pace)) {
      return 0;
    }
    probing = true;
    probedBefore = true;
    lastAt = now;
    return ++round;
  }

  /**
   * Ends round {@code r} with {@code answers}: the answer of the highest term (one that names a
   * leader, among equals), if {@code r} is the round in flight and that term is at least every term
   * heard before (it becomes the highest); else null.
   */
  SessionMachine.@Nullable ProbeAnswer settle(long r, List<SessionMachine.ProbeAnswer> answers) {
    if (r != round || !probing) {
      return null;
    }
    probing = false;
    SessionMachine.@Nullable ProbeAnswer best = null;
    for (SessionMachine.ProbeAnswer a : answers) {
      if (best == null
          || a.term() > best.term()
          || (a.term() == best.term() && best.leader().isEmpty())) {
        best = a;
      }
    }
    if (best == null || best.term() < highestTerm) {
      return null; // nobody answered, or only servers behind what was heard before
    }
    highestTerm = best.term();
    return best;
  }
}
