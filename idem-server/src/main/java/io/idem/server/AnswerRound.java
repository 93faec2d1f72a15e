package io.idem.server;

import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The answers of one log entry, handed out together on one thread ({@link Batcher}'s replies
 * thread). A session stream whose client takes batches ({@code Hello.batches}) joins the round open
 * on its thread, keeps its answers while the round lasts, and sends them in one frame when it
 * closes: a gRPC message per stream and entry instead of one per command (docs/PERFORMANCE.md,
 * "Answers in batches").
 *
 * <p>A round belongs to the thread that opened it: {@link #join} on any other thread answers false,
 * and the caller sends at once, as without a round.
 */
final class AnswerRound implements AutoCloseable {
  /** A stream that keeps answers during a round. */
  interface Member {
    /**
     * Sends what it kept (nothing, if it sent it already). Called once per join, on the round's
     * thread.
     */
    void flush();
  }

  private static final Logger LOG = LoggerFactory.getLogger(AnswerRound.class);
  private static final ThreadLocal<AnswerRound> CURRENT = new ThreadLocal<>();

  private final List<Member> members = new ArrayList<>();
  private final AnswerRound outer;

  private AnswerRound(AnswerRound outer) {
    this.outer = outer;
  }

  /** Opens a round on this thread; a round opened inside another flushes its own members. */
  static AnswerRound open() {
    AnswerRound r = new AnswerRound(CURRENT.get());
    CURRENT.set(r);
    return r;
  }

  /**
   * Whether a round is open on this thread; if so, {@code member} is flushed when it closes. A
   * member joins when it keeps an answer and had none kept.
   */
  static boolean join(Member member) {
    AnswerRound r = CURRENT.get();
    if (r == null) {
      return false;
    }
    r.members.add(member);
    return true;
  }

  /**
   * Ends the round and flushes its members, in the order they joined. Never throws: a member that
   * fails is logged and the others are flushed.
   */
  @Override
  public void close() {
    if (outer == null) {
      CURRENT.remove();
    } else {
      CURRENT.set(outer);
    }
    for (Member m : members) {
      try {
        m.flush();
      } catch (RuntimeException e) {
        // The others still get their answers, and the caller (the batcher) goes on to complete
        // the entry's read barriers: one broken member must not hold up anything else.
        LOG.warn("sending the answers of a round failed", e);
      }
    }
    members.clear();
  }
}
