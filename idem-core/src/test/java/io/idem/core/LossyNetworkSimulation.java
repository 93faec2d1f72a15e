package io.idem.core;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.TreeMap;

/**
 * A seeded, single-threaded simulation of many clients talking to one {@link SessionTable} through
 * a network that drops, duplicates, delays and reorders requests and responses. Clients pipeline,
 * retry with the same numbers, pause past their TTL, and (named ones) crash and resume from a
 * durable journal. The table is snapshotted and restored from the snapshot every few seconds.
 *
 * <p>Every check throws {@link AssertionError} at once; the caller adds the seed. The same seed
 * gives the same run: all randomness comes from one {@link SplittableRandom}, and no iteration
 * order depends on hashing.
 */
final class LossyNetworkSimulation {

  /** The knobs of one run. */
  record Params(
      int clients,
      int opsPerClient,
      int clientWindow,
      int tableWindow,
      int maxSessions,
      long ttlMs,
      double drop,
      double duplicate,
      double longDelay,
      double pausePerTick,
      double crashPerTick,
      long snapshotEveryMs) {}

  /** What happened, for the caller's assertions and report. */
  record Result(
      long opsAcknowledged,
      long opsAbandoned,
      long requestsSent,
      long messagesDropped,
      long messagesDuplicated,
      long duplicatesSuppressed,
      Map<RejectCode, Long> rejections,
      long snapshotRestores,
      long crashes,
      long pauses,
      long expiredSessions,
      long maxSavedResponses,
      long simulatedMs) {}

  private static final long RTO_MS = 250;
  private static final long TICK_MS = 50;
  private static final long MAX_SIM_MS = 3_600_000;

  private final Params p;
  private final SplittableRandom rnd;
  private final PriorityQueue<Event> events =
      new PriorityQueue<>(
          (a, b) ->
              a.time != b.time ? Long.compare(a.time, b.time) : Long.compare(a.order, b.order));
  private long order;
  private long now;

  // Server side: the table plus the "state machine" it guards.
  private SessionTable table;
  private long logIndex;
  private long applyCounter;
  private final Map<Long, Long> lastAppliedSeq = new HashMap<>();
  private final int[][] appliedCount;

  /** Per op, what its client learnt: {@link #ACKED}, {@link #ABANDONED}, or 0 for nothing yet. */
  private final byte[][] outcome;

  private static final byte ACKED = 1;
  private static final byte ABANDONED = 2;

  private final Map<RejectCode, Long> rejections = new EnumMap<>(RejectCode.class);
  private final Slot[] slots;
  private long requestsSent;
  private long dropped;
  private long duplicated;
  private long duplicatesSuppressed;
  private long restores;
  private long crashes;
  private long pauses;
  private long expired;
  private long maxSaved;

  LossyNetworkSimulation(long seed, Params params) {
    this.p = params;
    this.rnd = new SplittableRandom(seed);
    this.table =
        new SessionTable(
            SessionTableConfig.builder()
                .window(params.tableWindow())
                .maxSessions(params.maxSessions())
                .build());
    this.appliedCount = new int[params.clients()][params.opsPerClient()];
    this.outcome = new byte[params.clients()][params.opsPerClient()];
    this.slots = new Slot[params.clients()];
    for (int i = 0; i < slots.length; i++) {
      slots[i] = new Slot(i, i % 2 == 0 ? "client-" + i : null);
    }
  }

  Result run() {
    for (Slot s : slots) {
      s.start(new Instance(s));
    }
    schedule(p.snapshotEveryMs(), this::snapshotAndRestore);
    while (!events.isEmpty() && !allDone()) {
      Event e = events.poll();
      now = e.time;
      if (now > MAX_SIM_MS) {
        throw new AssertionError("no progress: clients still busy after " + MAX_SIM_MS + " ms");
      }
      e.action.run();
    }
    return verifyEnd();
  }

  // ---- network ----

  private record Event(long time, long order, Runnable action) {}

  private void schedule(long delay, Runnable action) {
    events.add(new Event(now + delay, order++, action));
  }

  /** Sends over the lossy link: maybe dropped, maybe delivered twice, each copy delayed. */
  private void send(Runnable delivery) {
    if (rnd.nextDouble() < p.drop()) {
      dropped++;
      return;
    }
    schedule(delay(), delivery);
    if (rnd.nextDouble() < p.duplicate()) {
      duplicated++;
      schedule(delay(), delivery);
    }
  }

  private long delay() {
    return rnd.nextDouble() < p.longDelay() ? 20 + rnd.nextInt(300) : 1 + rnd.nextInt(10);
  }

  // ---- server ----

  private void serverRegister(Instance from, String name, long nonce) {
    // The client chooses its secret with each registration attempt and keeps both across the
    // attempt's retries; here it is derived from the attempt's nonce.
    Registration r =
        table.register(++logIndex, secretHi(nonce), secretLo(nonce), name, p.ttlMs(), nonce, now);
    afterCommand();
    send(() -> from.onRegistration(nonce, r));
  }

  static long secretHi(long nonce) {
    return nonce;
  }

  static long secretLo(long nonce) {
    return ~nonce;
  }

  private void serverResume(Instance from, String name, long hi, long lo, long nonce) {
    logIndex++;
    Registration r = table.resume(name, hi, lo, nonce, now);
    afterCommand();
    send(() -> from.onRegistration(nonce, r));
  }

  private void serverCommand(Instance from, long id, long epoch, long seq, long ack, long opId) {
    logIndex++;
    Admission a = table.admit(id, epoch, seq, ack, now);
    byte[] response = null;
    if (a == Admission.NEW) {
      apply(id, seq, opId);
      response = ByteBuffer.allocate(16).putLong(opId).putLong(++applyCounter).array();
      table.record(id, seq, ack, now, response);
    } else if (a instanceof Admission.Duplicate d) {
      duplicatesSuppressed++;
      response = d.response();
      long savedOp = ByteBuffer.wrap(response).getLong();
      if (savedOp != opId) {
        throw new AssertionError(
            "duplicate of session "
                + id
                + " seq "
                + seq
                + " answered with the response of op "
                + savedOp
                + ", not op "
                + opId);
      }
    }
    long nextSeq = table.nextSeq(id);
    afterCommand();
    byte[] answer = response;
    RejectCode code = a instanceof Admission.Rejected r ? r.code() : null;
    if (code != null) {
      rejections.merge(code, 1L, Long::sum);
    }
    send(() -> from.onResponse(id, seq, answer, code, nextSeq));
  }

  private void serverKeepAlive(long id, long epoch, long ack) {
    logIndex++;
    table.keepAlive(id, epoch, ack, now);
    afterCommand();
  }

  /** The state machine: applies op {@code opId} and checks that it never happens twice. */
  private void apply(long sessionId, long seq, long opId) {
    long previous = lastAppliedSeq.getOrDefault(sessionId, 0L);
    if (seq != previous + 1) {
      throw new AssertionError(
          "FIFO broken: session " + sessionId + " applied seq " + seq + " after " + previous);
    }
    lastAppliedSeq.put(sessionId, seq);
    int client = (int) (opId / p.opsPerClient());
    int op = (int) (opId % p.opsPerClient());
    if (++appliedCount[client][op] > 1) {
      throw new AssertionError("op " + opId + " applied twice (session " + sessionId + ")");
    }
    Slot slot = slots[client];
    if (op <= slot.lastAppliedOp) {
      throw new AssertionError(
          "client " + client + " op " + op + " applied after op " + slot.lastAppliedOp);
    }
    slot.lastAppliedOp = op;
  }

  /** What the replicated state machine does after each command: expiry, and memory checks. */
  private void afterCommand() {
    expired += table.expire(now, id -> lastAppliedSeq.remove(id));
    if (table.size() > p.maxSessions()) {
      throw new AssertionError("sessions " + table.size() + " above the bound " + p.maxSessions());
    }
    long saved = table.savedResponses();
    maxSaved = Math.max(maxSaved, saved);
    if (saved > (long) table.size() * p.tableWindow()) {
      throw new AssertionError("saved responses " + saved + " above sessions x window");
    }
  }

  private void snapshotAndRestore() {
    String digest = table.digest();
    try {
      ByteArrayOutputStream out = new ByteArrayOutputStream();
      table.writeSnapshot(out);
      table = SessionTable.readSnapshot(new ByteArrayInputStream(out.toByteArray()));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (!table.digest().equals(digest)) {
      throw new AssertionError("snapshot round trip changed the digest");
    }
    for (long id : table.sessions().sortedIds()) {
      if (table.session(id).orElseThrow().savedResponses() > p.tableWindow()) {
        throw new AssertionError("session " + id + " saves more responses than the window");
      }
    }
    restores++;
    schedule(p.snapshotEveryMs(), this::snapshotAndRestore);
  }

  // ---- clients ----

  /** A client's durable side: its identity journal and the logical operations it must perform. */
  private final class Slot {
    final int index;
    final String name;
    int nextOp;
    int lastAppliedOp = -1;
    long acknowledged;
    long abandoned;
    Instance current;
    // The identity journal: written before a request leaves, read by a restarted instance.
    long journalId = -1;
    long journalHi;
    long journalLo;
    long journalNextSeq;
    final TreeMap<Long, Long> journalOutstanding = new TreeMap<>();

    Slot(int index, String name) {
      this.index = index;
      this.name = name;
    }

    void start(Instance instance) {
      current = instance;
      instance.begin();
    }

    boolean done() {
      return nextOp == p.opsPerClient() && journalOutstanding.isEmpty() && current.active();
    }
  }

  private enum Phase {
    REGISTERING,
    RESUMING,
    ACTIVE
  }

  /** One incarnation of a client process. Dead instances ignore everything they receive. */
  private final class Instance {
    final Slot slot;
    boolean alive = true;
    Phase phase;
    long nonce;
    long id = -1;
    long epoch;
    long hi;
    long lo;
    long nextSeq;
    long lastSend;
    long lastResendAll;
    long pausedUntil;

    Instance(Slot slot) {
      this.slot = slot;
    }

    boolean active() {
      return phase == Phase.ACTIVE;
    }

    void begin() {
      nonce = rnd.nextLong();
      if (slot.journalId >= 0 && slot.name != null) {
        phase = Phase.RESUMING;
      } else {
        phase = Phase.REGISTERING;
      }
      sendRegistration();
      schedule(TICK_MS, this::tick);
    }

    void sendRegistration() {
      lastSend = now;
      requestsSent++;
      long n = nonce;
      if (phase == Phase.RESUMING) {
        long h = slot.journalHi;
        long l = slot.journalLo;
        send(() -> serverResume(this, slot.name, h, l, n));
      } else {
        send(() -> serverRegister(this, slot.name, n));
      }
    }

    void onRegistration(long forNonce, Registration r) {
      if (!alive || forNonce != nonce || active()) {
        return;
      }
      if (r instanceof Registration.Refused refused) {
        if (phase == Phase.RESUMING && refused.code() == RejectCode.SESSION_EXPIRED) {
          abandonOutstanding();
          phase = Phase.REGISTERING;
          nonce = rnd.nextLong();
        }
        if (refused.code() != RejectCode.NAME_IN_USE
            && refused.code() != RejectCode.TOO_MANY_SESSIONS
            && refused.code() != RejectCode.SESSION_EXPIRED) {
          throw new AssertionError("client " + slot.index + " registration refused: " + r);
        }
        return; // the tick retries
      }
      Registration.Granted g = (Registration.Granted) r;
      id = g.clientId();
      epoch = g.epoch();
      if (phase == Phase.REGISTERING) {
        hi = secretHi(forNonce);
        lo = secretLo(forNonce);
      }
      if (phase == Phase.REGISTERING) {
        slot.journalId = id;
        slot.journalHi = hi;
        slot.journalLo = lo;
        slot.journalNextSeq = 1;
      }
      nextSeq = slot.journalNextSeq;
      phase = Phase.ACTIVE;
      resendAll();
      fill();
    }

    void tick() {
      if (!alive) {
        return;
      }
      schedule(TICK_MS, this::tick);
      if (now < pausedUntil) {
        return;
      }
      if (rnd.nextDouble() < p.pausePerTick()) {
        pauses++;
        pausedUntil = now + p.ttlMs() / 2 + rnd.nextLong(p.ttlMs() * 2);
        return;
      }
      if (slot.name != null && active() && rnd.nextDouble() < p.crashPerTick()) {
        crashes++;
        alive = false;
        slot.start(new Instance(slot));
        return;
      }
      if (!active()) {
        if (now - lastSend >= RTO_MS) {
          sendRegistration();
        }
        return;
      }
      if (!slot.journalOutstanding.isEmpty()
          && now - lastSend >= RTO_MS
          && now - lastResendAll >= RTO_MS) {
        resendAll();
      } else if (now - lastSend >= p.ttlMs() / 5) {
        lastSend = now;
        long ack = ack();
        long i = id;
        long e = epoch;
        send(() -> serverKeepAlive(i, e, ack));
      }
      fill();
    }

    long ack() {
      return slot.journalOutstanding.isEmpty() ? nextSeq : slot.journalOutstanding.firstKey();
    }

    /**
     * Issues new operations while the window has room; journals each before it leaves. The window
     * bounds the span from the lowest unanswered number to the next one, not the count of
     * unanswered requests: answers arrive out of order, and the table keeps every response from the
     * lowest unanswered number up.
     */
    void fill() {
      while (nextSeq - ack() < p.clientWindow() && slot.nextOp < p.opsPerClient()) {
        long opId = (long) slot.index * p.opsPerClient() + slot.nextOp++;
        long seq = nextSeq++;
        slot.journalNextSeq = nextSeq;
        slot.journalOutstanding.put(seq, opId);
        transmit(seq, opId);
      }
    }

    void resendAll() {
      lastResendAll = now;
      for (Map.Entry<Long, Long> e : slot.journalOutstanding.entrySet()) {
        transmit(e.getKey(), e.getValue());
      }
    }

    void transmit(long seq, long opId) {
      lastSend = now;
      requestsSent++;
      long ack = ack();
      long i = id;
      long e = epoch;
      send(() -> serverCommand(this, i, e, seq, ack, opId));
    }

    void onResponse(long forId, long seq, byte[] response, RejectCode code, long serverNextSeq) {
      if (!alive || forId != id || !active() || now < pausedUntil) {
        return; // a dead or paused process reads nothing; a stale session's answers are moot
      }
      Long opId = slot.journalOutstanding.get(seq);
      if (code == null) {
        if (opId == null) {
          return; // a second copy of an answer already taken
        }
        long answered = ByteBuffer.wrap(response).getLong();
        if (answered != opId) {
          throw new AssertionError(
              "client " + slot.index + " seq " + seq + " got op " + answered + ", sent op " + opId);
        }
        slot.journalOutstanding.remove(seq);
        slot.acknowledged++;
        outcome[slot.index][(int) (opId % p.opsPerClient())] = ACKED;
        fill();
        return;
      }
      switch (code) {
        case RESPONSE_DISCARDED -> {
          if (opId != null) {
            throw new AssertionError(
                "client " + slot.index + " seq " + seq + " discarded before it was acknowledged");
          }
        }
        case OUT_OF_ORDER -> {
          if (now - lastResendAll >= 5 && serverNextSeq < seq) {
            resendAll();
          }
        }
        case FENCED ->
            throw new AssertionError("live instance of client " + slot.index + " fenced");
        case SESSION_EXPIRED -> {
          abandonOutstanding();
          phase = Phase.REGISTERING;
          nonce = rnd.nextLong();
          slot.journalId = -1;
          sendRegistration();
        }
        default ->
            throw new AssertionError(
                "client " + slot.index + " seq " + seq + " refused with " + code);
      }
    }

    /** The session is gone with requests in flight: their outcome is unknown, never retried. */
    void abandonOutstanding() {
      slot.abandoned += slot.journalOutstanding.size();
      for (long opId : slot.journalOutstanding.values()) {
        outcome[slot.index][(int) (opId % p.opsPerClient())] = ABANDONED;
      }
      slot.journalOutstanding.clear();
    }
  }

  private boolean allDone() {
    for (Slot s : slots) {
      if (!s.done()) {
        return false;
      }
    }
    return true;
  }

  private Result verifyEnd() {
    long acked = 0;
    long abandoned = 0;
    for (Slot s : slots) {
      acked += s.acknowledged;
      abandoned += s.abandoned;
    }
    // Every acknowledged op was applied exactly once, an abandoned one at most once, and every op
    // ended one way or the other.
    for (int c = 0; c < p.clients(); c++) {
      for (int op = 0; op < p.opsPerClient(); op++) {
        int applied = appliedCount[c][op];
        byte o = outcome[c][op];
        boolean ok = o == ACKED ? applied == 1 : o == ABANDONED && applied <= 1;
        if (!ok) {
          throw new AssertionError(
              "client " + c + " op " + op + ": applied " + applied + " times, outcome " + o);
        }
      }
    }
    return new Result(
        acked,
        abandoned,
        requestsSent,
        dropped,
        duplicated,
        duplicatesSuppressed,
        Map.copyOf(rejections),
        restores,
        crashes,
        pauses,
        expired,
        maxSaved,
        now);
  }
}
