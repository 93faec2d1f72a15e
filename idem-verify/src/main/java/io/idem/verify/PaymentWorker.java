package io.idem.verify;

import io.idem.client.Fence;
import io.idem.client.FencedWriteException;
import io.idem.client.IdemClient;
import io.idem.client.IdemException;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeySettlement;
import io.idem.client.Write;
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
 * 001's {@code withdraw(id, account, amount)} behind an application idempotency key on Idem. Every
 * worker processes the same stream of payments (lane {@code l} takes payments {@code l, l + lanes,
 * ...}), so each payment arrives at every worker: concurrent duplicates and retries, as a
 * redelivering queue makes them.
 *
 * <p>One payment, fenced (the default): acquire {@code payments/pay-i}; the business step takes
 * {@code business-ms}; a fenced put of the payment's status record {@code payment/i} (the owner's
 * token); then the completion, carrying the ledger entry {@code i:amount:token} appended to {@code
 * ledger/account} in the same step. A stale owner's put and completion are refused by the fence; a
 * takeover owner redoes both. Unfenced (the negative control): the same writes without fence, and
 * the ledger entry as a write of its own before the completion, as seed 001 does it.
 *
 * <p>The journal gets {@code start lane i} before a payment and {@code ack lane i response} when
 * the worker answered it; {@code refused i} for every fenced refusal it met. A restarted worker
 * resumes each lane at the last payment it started.
 *
 * <p>Arguments: {@code servers journal lanes end-nanos fenced in-progress-ms business-ms accounts}.
 * {@code end-nanos} is a {@link System#nanoTime} of the campaign's process (one clock per machine).
 */
public final class PaymentWorker {
  /** The scope of the payments' keys. */
  static final String SCOPE = "payments";

  private final IdemClient client;
  private final BufferedWriter journal;
  private final boolean fenced;
  private final Duration inProgress;
  private final long businessMs;
  private final int accounts;
  private final AtomicLong refusals = new AtomicLong();

  private PaymentWorker(
      IdemClient client,
      BufferedWriter journal,
      boolean fenced,
      Duration inProgress,
      long businessMs,
      int accounts) {
    this.client = client;
    this.journal = journal;
    this.fenced = fenced;
    this.inProgress = inProgress;
    this.businessMs = businessMs;
    this.accounts = accounts;
  }

  /**
   * A worker in this process, without a journal, over {@code client}: the campaign's settling pass
   * after the faults.
   */
  static PaymentWorker settler(
      IdemClient client, boolean fenced, Duration inProgress, long businessMs, int accounts) {
    return new PaymentWorker(client, null, fenced, inProgress, businessMs, accounts);
  }

  /** The account payment {@code i} debits. */
  static int account(long i, int accounts) {
    return (int) (i % accounts);
  }

  /** The amount of payment {@code i}. */
  static long amount(long i) {
    return 1 + (i * 31) % 97;
  }

  /** The key of payment {@code i}. */
  static String key(long i) {
    return "pay-" + i;
  }

  /** Runs the worker; exit status 0 when it ran to its end, 2 on bad arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length != 8) {
      System.err.println(
          "usage: PaymentWorker servers journal lanes end-nanos fenced in-progress-ms business-ms"
              + " accounts");
      System.exit(2);
    }
    Path journalFile = Path.of(args[1]);
    int lanes = Integer.parseInt(args[2]);
    long end = Long.parseLong(args[3]);
    boolean fenced = Boolean.parseBoolean(args[4]);
    Duration inProgress = Duration.ofMillis(Long.parseLong(args[5]));
    long businessMs = Long.parseLong(args[6]);
    int accounts = Integer.parseInt(args[7]);
    Map<Integer, Long> resume = resumePoints(journalFile, lanes);
    try (IdemClient client =
            IdemClient.builder()
                .servers(args[0])
                .requestTimeout(Duration.ofSeconds(20))
                .stallTimeout(Duration.ofSeconds(2))
                .build();
        BufferedWriter w =
            Files.newBufferedWriter(
                journalFile,
                StandardCharsets.UTF_8,
                StandardOpenOption.CREATE,
                StandardOpenOption.APPEND)) {
      w.newLine(); // a line torn by a kill -9 of the previous life ends here
      PaymentWorker worker = new PaymentWorker(client, w, fenced, inProgress, businessMs, accounts);
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
    byte[] fingerprint = (account(i, accounts) + ":" + amount(i)).getBytes(StandardCharsets.UTF_8);
    while (System.nanoTime() < giveUp) {
      try {
        KeyAcquisition a =
            client.acquireKey(SCOPE, key(i), fingerprint, inProgress, Duration.ofHours(1));
        if (a instanceof KeyAcquisition.Completed c) {
          return new String(c.response(), StandardCharsets.UTF_8);
        }
        if (a instanceof KeyAcquisition.Mismatch) {
          write("mismatch " + i);
          return "mismatch";
        }
        if (a instanceof KeyAcquisition.Acquired owned) {
          String done = run(i, owned.token());
          if (done != null) {
            return done;
          }
        } else {
          Thread.sleep(50); // in progress elsewhere: ask again
        }
      } catch (IdemException e) {
        sleepQuietly(100); // not sent or outcome unknown: ask again with the same key
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return null;
      }
    }
    return null;
  }

  /** The business step under {@code token}; its response, or null if a newer owner fenced it. */
  private String run(long i, long token) throws InterruptedException {
    Thread.sleep(businessMs);
    String ledger = "ledger/" + account(i, accounts);
    byte[] entry = (i + ":" + amount(i) + ":" + token).getBytes(StandardCharsets.UTF_8);
    byte[] status = Long.toString(token).getBytes(StandardCharsets.UTF_8);
    String response = "paid " + i + " amount " + amount(i) + " token " + token;
    byte[] body = response.getBytes(StandardCharsets.UTF_8);
    KeySettlement s;
    if (fenced) {
      try {
        client.fenced(new Fence(SCOPE, key(i), token)).put("payment/" + i, status);
      } catch (FencedWriteException e) {
        refused(i);
        return null;
      }
      s = client.completeKey(SCOPE, key(i), token, body, Write.append(ledger, entry));
    } else {
      client.put("payment/" + i, status);
      client.append(ledger, entry);
      s = client.completeKey(SCOPE, key(i), token, body);
    }
    if (s instanceof KeySettlement.Fenced) {
      refused(i);
      return null;
    }
    return response;
  }

  private void refused(long i) {
    refusals.incrementAndGet();
    write("refused " + i);
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
