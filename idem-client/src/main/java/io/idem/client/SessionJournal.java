package io.idem.client;

import io.idem.client.internal.Effect;
import io.idem.client.internal.IdentityJournal;
import io.idem.client.internal.SessionMachine;
import java.io.IOException;
import java.util.concurrent.ForkJoinPool;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The journal side of a {@link SessionDriver}'s effects: each journal effect written to the
 * identity file, blocking (an fsync) in a way the worker pool knows of. Once a write fails nothing
 * more is written, nor may anything leave ({@link #broken}), and the machine hears of it. Used by
 * the driver's runner alone.
 */
final class SessionJournal {
  private static final Logger LOG = LoggerFactory.getLogger(SessionDriver.class);

  private final IdentityJournal journal;
  private final Consumer<Consumer<SessionMachine>> events;
  private volatile boolean broken;

  /**
   * @param events takes an event for the machine (the driver's {@code apply})
   */
  SessionJournal(IdentityJournal journal, Consumer<Consumer<SessionMachine>> events) {
    this.journal = journal;
    this.events = events;
  }

  /** Whether a write failed: from then on, nothing is written and nothing may leave. */
  boolean broken() {
    return broken;
  }

  /**
   * Runs a journal effect, telling the worker pool that it may block (an fsync), so that the pool
   * adds a thread rather than let completions of other sessions wait behind the disk.
   */
  void run(Effect effect) {
    ForkJoinPool.ManagedBlocker io =
        new ForkJoinPool.ManagedBlocker() {
          private boolean done;

          @Override
          public boolean block() {
            write(effect);
            done = true;
            return true;
          }

          @Override
          public boolean isReleasable() {
            return done;
          }
        };
    try {
      ForkJoinPool.managedBlock(io);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (!io.isReleasable()) {
        write(effect); // never skip a journal write: it orders what may leave
      }
    }
  }

  private void write(Effect effect) {
    if (broken) {
      return;
    }
    try {
      if (effect instanceof Effect.JournalSent s) {
        journal.sent(s.requests());
      } else if (effect instanceof Effect.JournalDone d) {
        journal.done(d.seq());
      } else if (effect instanceof Effect.JournalSync) {
        journal.sync();
      } else if (effect instanceof Effect.JournalPending p) {
        journal.pendingRegistration(p.name(), p.nonce(), p.ttlMs(), p.secretHi(), p.secretLo());
      } else if (effect instanceof Effect.JournalIdentity i) {
        journal.identity(
            new IdentityJournal.Identity(
                i.name(), i.clientId(), i.secretHi(), i.secretLo(), i.ttlMs()));
      } else if (effect instanceof Effect.JournalForget) {
        journal.forget();
      } else {
        throw new IllegalStateException("unknown effect " + effect);
      }
    } catch (IOException e) {
      // Nothing more may leave: a request not journaled would be lost by a restart. The machine
      // closes the client; its effects (failing the calls) come through this runner.
      broken = true;
      LOG.error("identity journal failed; closing the client", e);
      events.accept(m -> m.journalFailed(e));
    }
  }
}
