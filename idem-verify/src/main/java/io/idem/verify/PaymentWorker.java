package io.idem.verify;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A payment service in a process of its own, for the keys campaign to kill, pause and restart: seed
 * 001's {@code withdraw(id, account, amount)} behind an application idempotency key, on any store
 * the campaign runs ({@link PaymentStore}: Idem, Redis, seed 001). Every worker processes the same
 * stream of payments (lane {@code l} takes payments {@code l, l + lanes, ...}), so each payment
 * arrives at every worker: concurrent duplicates and retries, as a redelivering queue makes them.
 *
 * <p>One payment ({@link #pay}): acquire its key; if owned, the business step takes {@code
 * business-ms}, then the store's writes and the completion ({@link PaymentBackend#pay}: on Idem a
 * fenced status put, then the completion carrying the ledger append, or, with {@link
 * PaymentStore.Writes#FENCED_LEDGER}, a fenced ledger append of its own and a plain completion; on
 * Redis the completion carrying the ledger push; on seed 001 the push, then Confirm). A fenced
 * refusal sends the worker back to acquire, which then replays the winner's answer. A key in
 * progress elsewhere is asked again every 50 ms; a store error (outcome unknown) after 100 ms, with
 * the same key.
 *
 * <p>The journal gets {@code start lane i} before a payment and {@code ack lane i response} when
 * the worker answered it; {@code owned i token} when it acquired a payment's key, and {@code
 * refused i} for every fenced refusal it met ({@code refused i past-deadline} for a fenced write
 * refused because its token's deadline had passed). A restarted worker resumes each lane at the
 * last payment it started.
 *
 * <p>Arguments: {@code store address journal lanes end-nanos writes in-progress-ms business-ms
 * accounts}, {@code writes} one of {@link PaymentStore.Writes}. {@code end-nanos} is a {@link
 * System#nanoTime} of the campaign's process (one clock per machine).
 */
public final class PaymentWorker {
  /** A worker's answer for a completed payment whose store keeps no response (seed 001). */
  static final String NO_RESPONSE = "confirmed";

  /** The journal's mark of a refusal for a passed deadline: {@code refused i past-deadline}. */
  static final String PAST_DEADLINE = "past-deadline";

  private final PaymentBackend backend;
  private final BufferedWriter journal;
  private final Duration inProgress;
  private final long businessMs;
  private final int accounts;
  private final AtomicLong refusals = new AtomicLong();

  private PaymentWorker(
      PaymentBackend backend,
      BufferedWriter journal,
      Duration inProgress,
      long businessMs,
      int accounts) {
    this.backend = backend;
    this.journal = journal;
    this.inProgress = inProgress;
    this.businessMs = businessMs;
    this.accounts = accounts;
  }

  /**
   * A worker in this process, without a journal, over {@code backend}: the campaign's settling pass
   * after the faults.
   */
  static PaymentWorker settler(
      PaymentBackend backend, Duration inProgress, long businessMs, int accounts) {
    return new PaymentWorker(backend, null, inProgress, businessMs, accounts);
  }

  /** The key of payment {@code i}. */
  static String key(long i) {
    return "pay-" + i;
  }

  /** Runs the worker; exit status 0 when it ran to its end, 2 on bad arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length != 9) {
      System.err.println(
          "usage: PaymentWorker store address journal lanes end-nanos writes in-progress-ms"
              + " business-ms accounts");
      System.exit(2);
    }
    PaymentStore store = PaymentStore.named(args[0]);
    Path journalFile = Path.of(args[2]);
    int lanes = Integer.parseInt(args[3]);
    long end = Long.parseLong(args[4]);
    PaymentStore.Writes writes = PaymentStore.Writes.valueOf(args[5]);
    Duration inProgress = Duration.ofMillis(Long.parseLong(args[6]));
    long businessMs = Long.parseLong(args[7]);
    int accounts = Integer.parseInt(args[8]);
    Map<Integer, Long> resume = resumePoints(journalFile, lanes);
    try (PaymentBackend backend = connect(store, args[1], writes, end);
        BufferedWriter w =
            Files.newBufferedWriter(
                journalFile,
                StandardCharsets.UTF_8,
                StandardOpenOption.CREATE,
                StandardOpenOption.APPEND)) {
      w.newLine(); // a line torn by a kill -9 of the previous life ends here
      PaymentWorker worker = new PaymentWorker(backend, w, inProgress, businessMs, accounts);
      List<Thread> threads = new ArrayList<>();
      for (int l = 0; l < lanes; l++) {
        long first = resume.getOrDefault(l, (long) l);
        Thread t = new Thread(() -> worker.lane(first, lanes, end), "payment-lane-" + l);
        t.start();
        threads.add(t);
      }
      for (Thread t : threads) {
        t.join();
      }
    }
    System.exit(0);
  }

  /**
   * Connects, asking again every 200 ms while the store is down (a worker restarted during a store
   * fault), until {@code end}.
   */
  private static PaymentBackend connect(
      PaymentStore store, String address, PaymentStore.Writes writes, long end)
      throws InterruptedException {
    while (true) {
      try {
        return store.connect(address, writes, false);
      } catch (PaymentBackend.Unavailable e) {
        if (System.nanoTime() > end) {
          throw e;
        }
        Thread.sleep(200);
      }
    }
  }

  /** Each lane's last started payment in the journal (a torn last line is ignored). */
  static Map<Integer, Long> resumePoints(Path journalFile, int lanes) throws IOException {
    Map<Integer, Long> resume = new HashMap<>();
    if (!Files.exists(journalFile)) {
      return resume;
    }
    for (String line : Files.readAllLines(journalFile, StandardCharsets.UTF_8)) {
      String[] f = line.split(" ", 4);
      if (f.length >= 3 && f[0].equals("start")) {
        try {
          int lane = Integer.parseInt(f[1]);
          long i = Long.parseLong(f[2]);
          if (lane < lanes && i % lanes == lane) {
            resume.merge(lane, i, Math::max);
          }
        } catch (NumberFormatException torn) {
          // a line cut by a kill -9
        }
      }
    }
    return resume;
  }

  private void lane(long first, int lanes, long end) {
    for (long i = first; System.nanoTime() < end; i += lanes) {
      write("start " + (i % lanes) + " " + i);
      String response = pay(i, end + 30_000_000_000L);
      if (response == null) {
        return;
      }
      write("ack " + (i % lanes) + " " + i + " " + response);
    }
  }

  /**
   * Processes payment {@code i} until it is answered: by this worker's run, or by the replay of
   * another's. Null if {@code giveUp} (nanoTime) passed first.
   */
  String pay(long i, long giveUp) {
    Payment p = Payment.of(i, accounts);
    while (System.nanoTime() < giveUp) {
      try {
        PaymentBackend.Claim c = backend.acquire(p, inProgress);
        if (c instanceof PaymentBackend.Claim.Done d) {
          return d.response() != null ? d.response() : NO_RESPONSE;
        }
        if (c instanceof PaymentBackend.Claim.Mismatch) {
          write("mismatch " + i);
          return "mismatch";
        }
        if (c instanceof PaymentBackend.Claim.Owned owned) {
          write("owned " + i + " " + owned.token());
          Thread.sleep(businessMs); // the business step
          PaymentBackend.Attempt done = backend.pay(p, owned.token());
          if (done instanceof PaymentBackend.Attempt.Paid paid) {
            return paid.response();
          }
          // Fenced off (a newer owner, or this token's deadline passed): ask again, for the answer.
          refused(i, ((PaymentBackend.Attempt.Fenced) done).pastDeadline());
        } else {
          Thread.sleep(50); // in progress elsewhere: ask again
        }
      } catch (PaymentBackend.Unavailable e) {
        sleepQuietly(100); // not sent or outcome unknown: ask again with the same key
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return null;
      }
    }
    return null;
  }

  private void refused(long i, boolean pastDeadline) {
    refusals.incrementAndGet();
    write("refused " + i + (pastDeadline ? " " + PAST_DEADLINE : ""));
  }

  private static void sleepQuietly(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private synchronized void write(String line) {
    if (journal == null) {
      return;
    }
    try {
      journal.write(line);
      journal.newLine();
      journal.flush();
    } catch (IOException e) {
      throw new UncheckedIOException("cannot write the journal", e);
    }
  }
}
