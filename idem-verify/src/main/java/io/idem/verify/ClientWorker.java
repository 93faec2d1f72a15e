package io.idem.verify;

import io.idem.client.ClientTls;
import io.idem.client.IdemClient;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.jspecify.annotations.Nullable;

/**
 * A client in a process of its own, for the campaign to kill with SIGKILL and start again: it
 * appends unique elements to lists with a durable identity ({@link IdemClient.Builder#identity}),
 * so that a restarted process resumes its session and the calls its previous life had in flight are
 * resent with their numbers and applied once.
 *
 * <p>It journals every operation to its history file before the call leaves (outcome unknown), and
 * again when it learns the outcome ({@link History#readJournal}). On start it reads that journal
 * back to continue its ids, elements and issue order, and matches the calls the identity file
 * recovered to their journal lines by their (unique) element.
 *
 * <p>Arguments, all required: {@code servers identity-file journal label first-id t0-nanos
 * end-nanos window lists seed}. {@code t0-nanos} and {@code end-nanos} are {@link System#nanoTime}
 * values of the campaign's process (one monotonic clock per machine on Linux).
 */
public final class ClientWorker {
  private final BufferedWriter journal;
  private final String label;
  private final long t0;
  private final java.util.concurrent.atomic.AtomicLong failuresInARow =
      new java.util.concurrent.atomic.AtomicLong();
  private final java.util.Set<String> reported = java.util.concurrent.ConcurrentHashMap.newKeySet();

  private ClientWorker(BufferedWriter journal, String label, long t0) {
    this.journal = journal;
    this.label = label;
    this.t0 = t0;
  }

  /** Runs the worker; exit status 0 when it ran to its end, 2 on bad arguments. */
  public static void main(String[] args) throws Exception {
    if (args.length != 10 && args.length != 13) {
      System.err.println(
          "usage: ClientWorker servers identity-file journal label first-id t0-nanos end-nanos"
              + " window lists seed [tls-ca tls-cert tls-key]");
      System.exit(2);
    }
    ClientTls tls =
        args.length == 13
            ? new ClientTls(Path.of(args[10]), Path.of(args[11]), Path.of(args[12]))
            : null;
    String servers = args[0];
    Path identity = Path.of(args[1]);
    Path journalFile = Path.of(args[2]);
    String label = args[3];
    long firstId = Long.parseLong(args[4]);
    long t0 = Long.parseLong(args[5]);
    long end = Long.parseLong(args[6]);
    int window = Integer.parseInt(args[7]);
    int lists = Integer.parseInt(args[8]);
    long seed = Long.parseLong(args[9]);

    List<Op> before = History.readJournal(journalFile);
    cutTornTail(journalFile);
    long nextId = firstId;
    long element = firstId;
    long seq = 0;
    Map<Long, Op> pending = new HashMap<>();
    for (Op op : before) {
      nextId = Math.max(nextId, op.id() + 1);
      element = Math.max(element, op.value());
      seq = Math.max(seq, op.seq());
      if (op.outcome() == Op.Outcome.INFO) {
        pending.put(op.value(), op);
      }
    }
    try (BufferedWriter w =
        Files.newBufferedWriter(
            journalFile,
            StandardCharsets.UTF_8,
            StandardOpenOption.CREATE,
            StandardOpenOption.APPEND)) {
      new ClientWorker(w, label, t0)
          .run(servers, tls, identity, nextId, element, seq, pending, end, window, lists, seed);
    }
    System.exit(0);
  }

  /**
   * Cuts a last line torn by a kill -9 off the journal, in place (rewriting the whole file would
   * lose it to a kill in the middle of the rewrite), so that new lines start on a line of their
   * own.
   */
  private static void cutTornTail(Path file) throws IOException {
    if (!Files.exists(file)) {
      return;
    }
    try (FileChannel ch =
        FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      long keep = ch.size();
      ByteBuffer one = ByteBuffer.allocate(1);
      while (keep > 0) {
        one.clear();
        ch.read(one, keep - 1);
        if (one.get(0) == '\n') {
          break;
        }
        keep--;
      }
      ch.truncate(keep);
    }
  }

  private void run(
      String servers,
      ClientTls tls,
      Path identity,
      long nextId,
      long element,
      long seq,
      Map<Long, Op> pending,
      long end,
      int window,
      int lists,
      long seed)
      throws InterruptedException {
    Semaphore slots = new Semaphore(window);
    List<java.util.concurrent.CompletableFuture<Void>> resent = new java.util.ArrayList<>();
    Started started = start(servers, tls, identity, window, end);
    if (started == null) {
      System.err.println(label + ": could not start before the end of the run");
      return;
    }
    try (IdemClient client = started.client()) {
      int recovered = 0;
      // Said before the recovered calls' outcomes are handled: one that failed while the client
      // was built is reported at once, and would otherwise print before "started".
      List<Runnable> handles = new java.util.ArrayList<>();
      for (IdemClient.RecoveredCall rc : started.recovered()) {
        Op op =
            rc.description().equals("append")
                ? pending.get(Long.parseLong(new String(rc.value(), StandardCharsets.UTF_8)))
                : null;
        if (op == null) {
          System.err.println(label + ": a recovered call matches no journal line: " + rc);
          continue;
        }
        recovered++;
        // Not counted against the window: timed-out calls stay outstanding, so a previous life
        // may have had more in flight than the window.
        handles.add(() -> resent.add(rc.result().handle((r, e) -> complete(op, e, null))));
      }
      System.out.println(
          label + ": started, " + recovered + " calls recovered from its identity file");
      handles.forEach(Runnable::run);
      Random r = new Random(seed ^ nextId);
      while (System.nanoTime() < end) {
        if (failuresInARow.get() >= window) {
          // Every call fails at once (no session, say): the loop would journal thousands of
          // unknown appends a second (2.7 million in one 10-minute run) instead of waiting.
          Thread.sleep(100);
        }
        if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
          continue;
        }
        long value = ++element;
        String key = "list/" + r.nextInt(lists);
        Op op =
            new Op(
                nextId++,
                label,
                Op.Fn.APPEND,
                key,
                value,
                0,
                ++seq,
                System.nanoTime() - t0,
                Long.MAX_VALUE,
                Op.Outcome.INFO,
                null);
        write(op); // durable in the page cache before the call leaves: a kill -9 keeps it
        client
            .appendAsync(key, Long.toString(value).getBytes(StandardCharsets.UTF_8))
            .handle((len, e) -> complete(op, e, slots));
      }
      boolean answered = slots.tryAcquire(window, 60, TimeUnit.SECONDS);
      try {
        java.util.concurrent.CompletableFuture.allOf(
                resent.toArray(new java.util.concurrent.CompletableFuture<?>[0]))
            .get(answered ? 60 : 1, TimeUnit.SECONDS);
      } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
        answered = false;
      }
      if (!answered) {
        System.err.println(label + ": calls still unanswered 60 s after the end (left unknown)");
      }
    }
  }

  /** A started client and the calls it recovered from its identity file. */
  private record Started(IdemClient client, List<IdemClient.RecoveredCall> recovered) {}

  /**
   * Builds the client and takes the calls it recovered, again every second while the cluster does
   * not register it in time (a metadata group without a leader, say): a NotSentException means
   * nothing was sent, and an application would try again too. Null if the run ended first.
   */
  private @Nullable Started start(
      String servers, ClientTls tls, Path identity, int window, long end)
      throws InterruptedException {
    while (System.nanoTime() < end) {
      IdemClient client = null;
      try {
        client =
            IdemClient.builder()
                .servers(servers)
                .identity(identity, label)
                .requestTimeout(Duration.ofSeconds(30))
                .stallTimeout(Duration.ofSeconds(2))
                .sessionTtl(Duration.ofSeconds(60))
                .window(Math.max(window, 64))
                .tls(tls)
                .build();
        return new Started(client, client.recovered());
      } catch (io.idem.client.NotSentException e) {
        if (client != null) {
          client.close();
        }
        System.err.println(label + ": not started, trying again in 1 s: " + e.getMessage());
        Thread.sleep(1_000);
      }
    }
    return null;
  }

  /**
   * Journals the outcome. Only success is learned for sure: an append of this workload fails only
   * by a timeout, a lost session or fencing, which all leave it unknown (its INFO line stands).
   */
  private Void complete(Op op, Throwable e, Semaphore slots) {
    if (e != null) {
      failuresInARow.incrementAndGet();
      Throwable cause =
          e instanceof java.util.concurrent.CompletionException && e.getCause() != null
              ? e.getCause()
              : e;
      if (reported.add(cause.getClass().getName())) {
        System.err.println(label + ": an append failed (first of its kind): " + cause);
      }
    } else {
      failuresInARow.set(0);
    }
    if (e == null) {
      write(
          new Op(
              op.id(),
              op.process(),
              op.f(),
              op.key(),
              op.value(),
              0,
              op.seq(),
              op.start(),
              System.nanoTime() - t0,
              Op.Outcome.OK,
              null));
    }
    if (slots != null) {
      slots.release();
    }
    return null;
  }

  private synchronized void write(Op op) {
    try {
      journal.write(History.line(op));
      journal.newLine();
      journal.flush();
    } catch (IOException ex) {
      throw new UncheckedIOException(label + ": cannot write its journal", ex);
    }
  }
}
