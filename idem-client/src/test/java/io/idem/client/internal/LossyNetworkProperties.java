package io.idem.client.internal;

import static io.idem.client.internal.MachineHarness.MS;
import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.NotSentException;
import io.idem.client.SessionExpiredException;
import io.idem.core.Admission;
import io.idem.core.Registration;
import io.idem.core.RejectCode;
import io.idem.core.SessionTable;
import io.idem.core.SessionTableConfig;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link SessionMachine} against a model of the world: the real {@link SessionTable} of idem-core
 * plays the server, and a simulated network between them breaks streams, leaves them half-open
 * (silent both ways, no end ever reported), redirects with {@code NOT_LEADER}, loses registration
 * answers, forgets the session now and then, and delivers frames of replaced streams late. Calls
 * arrive throughout, some with short deadlines. The properties are the client's promise:
 *
 * <ul>
 *   <li>every call is applied at most once, and in the order the calls were made (FIFO);
 *   <li>a call answered OK was applied exactly once, and its answer is its own application's;
 *   <li>a call failed as not sent was never applied;
 *   <li>the client never makes a protocol error (window, discarded answers);
 *   <li>no caller waits past its call's deadline;
 *   <li>once the faults stop, every call ends within bounded (simulated) time, and if the session
 *       never expired, every call without a short deadline succeeded.
 * </ul>
 *
 * Each try is reproducible from its parameters (jqwik prints them, and its seed, on failure).
 */
class LossyNetworkProperties {

  @Property(tries = 150)
  void theClientKeepsItsPromiseOverALossyNetwork(
      @ForAll long seed,
      @ForAll @IntRange(min = 1, max = 8) int clientWindow,
      @ForAll @IntRange(min = 1, max = 8) int serverWindow,
      @ForAll @IntRange(min = 1, max = 80) int calls,
      @ForAll @IntRange(min = 0, max = 30) int faultPercent) {
    new Sim(seed, clientWindow, serverWindow, calls, faultPercent).run();
  }

  @Example
  void aHeavilyFaultedRunStillEndsWithEveryCallAnswered() {
    Sim sim = new Sim(2029, 4, 3, 200, 30);
    sim.run();
    // The faults really happened, and the client recovered from each kind.
    assertThat(sim.faults)
        .containsKeys("break", "half-open", "not-leader", "lost-register", "expire");
    assertThat(sim.faults.values()).as("%s", sim.faults).allMatch(n -> n > 3);
    assertThat(sim.machine.retries()).isGreaterThan(10);
    assertThat(sim.duplicatesServed).isPositive();
    assertThat(sim.probesAnswered).isPositive();
  }

  /** One simulated run. */
  static final class Sim {
    final Random r;
    final int calls;
    final int faultPercent;
    final int serverWindow;
    final SessionMachine machine;
    final SessionTable table;
    long now = 5_000_000 * MS;
    long nextClientId = 1;

    final List<SessionMachine.Call> made = new ArrayList<>();
    final Map<String, Integer> callIndex = new HashMap<>();
    final Set<Integer> shortDeadline = new HashSet<>();
    final List<String> applied = new ArrayList<>();
    final Map<String, Integer> faults = new TreeMap<>();
    final List<String> protocolErrors = new ArrayList<>();
    final Map<SessionMachine.Call, Long> doneAt = new HashMap<>();
    long duplicatesServed;
    boolean expired;

    // The network: per stream, frames each way in order; registrations in flight.
    final Map<Integer, ArrayDeque<ClientFrame>> toServer = new TreeMap<>();
    final Map<Integer, ArrayDeque<ServerFrame>> toClient = new TreeMap<>();
    final Map<Integer, long[]> boundTo = new HashMap<>(); // stream -> {clientId, epoch}
    final Set<Integer> silent = new HashSet<>();
    final ArrayDeque<Effect.Register> registrations = new ArrayDeque<>();
    final ArrayDeque<Effect.Probe> probes = new ArrayDeque<>();
    long term = 1;
    final Random pr; // the probes' answers, apart from r so that they do not shift its faults
    int probesAnswered;
    int currentStream = -1;

    Sim(long seed, int clientWindow, int serverWindow, int calls, int faultPercent) {
      this.r = new Random(seed);
      this.pr = new Random(~seed);
      this.calls = calls;
      this.faultPercent = faultPercent;
      this.serverWindow = serverWindow;
      this.table = new SessionTable(SessionTableConfig.builder().window(serverWindow).build());
      this.machine =
          new SessionMachine(
              new SessionMachine.Settings(
                  MachineHarness.SERVERS,
                  clientWindow,
                  60_000,
                  MachineHarness.KEEPALIVE,
                  MachineHarness.STALL,
                  MachineHarness.PROBE,
                  null,
                  false),
              r::nextLong,
              SessionMachine.Recovery.NONE);
    }

    long nowMs() {
      return now / MS;
    }

    void run() {
      int steps = calls * 12 + 200;
      for (int i = 0; i < steps; i++) {
        step(true);
      }
      // Heal: no more faults; everything must end within a bounded time.
      long end = now + 300_000 * MS;
      while (!allDone() && now < end) {
        step(false);
      }
      check();
    }

    boolean allDone() {
      return made.size() == calls && made.stream().allMatch(c -> c.future().isDone());
    }

    void step(boolean faulty) {
      int roll = r.nextInt(100);
      if (made.size() < calls && roll < 15) {
        submit();
      } else if (roll < 45) {
        deliverToServer();
      } else if (roll < 75) {
        deliverToClient();
      } else if (roll < 85) {
        deliverRegistration(faulty);
      } else if (faulty && r.nextInt(100) < faultPercent) {
        fault();
      } else {
        now += (1 + r.nextInt(200)) * MS;
        machine.tick(now);
        answerProbe();
      }
      if (!faulty && made.size() < calls) {
        submit();
      }
      runEffects();
    }

    void submit() {
      int i = made.size();
      String value = "v" + i;
      long deadline = 3_600_000 * MS;
      if (r.nextInt(5) == 0) {
        deadline = (50 + r.nextInt(3_000)) * MS;
        shortDeadline.add(i);
      }
      SessionMachine.Call c = new SessionMachine.Call(MachineHarness.append(value), now + deadline);
      made.add(c);
      callIndex.put(value, i);
      machine.submit(c, now);
    }

    void runEffects() {
      for (Effect e : machine.takeEffects()) {
        if (e instanceof Effect.Complete c) {
          doneAt.put(c.call(), now);
          c.call().future().complete(c.frame());
        } else if (e instanceof Effect.Fail f) {
          doneAt.put(f.call(), now);
          f.call().future().completeExceptionally(f.error());
          if (f.error() instanceof SessionExpiredException) {
            expired = true;
          }
        } else if (e instanceof Effect.Register reg) {
          registrations.add(reg);
        } else if (e instanceof Effect.OpenStream o) {
          currentStream = o.stream();
          toServer.put(o.stream(), new ArrayDeque<>());
          toClient.put(o.stream(), new ArrayDeque<>());
          toServer.get(o.stream()).add(ClientFrame.newBuilder().setHello(o.hello()).build());
        } else if (e instanceof Effect.Send s) {
          if (toServer.containsKey(s.stream()) && !silent.contains(s.stream())) {
            toServer.get(s.stream()).add(s.frame());
          }
        } else if (e instanceof Effect.EndStream end) {
          // Frames already on their way may still arrive, on either side.
          if (end.stream() == currentStream) {
            currentStream = -1;
          }
        } else if (e instanceof Effect.Probe p) {
          probes.add(p);
        }
        // ReplaceConnection, journal effects and Stop: nothing to model here.
      }
    }

    // ---- the server ----

    /**
     * Answers the oldest probe round: each server asked answers or not, with a term around the
     * current one (stale servers lag a term) and a leader among the servers, or none (an election).
     */
    void answerProbe() {
      Effect.Probe p = probes.poll();
      if (p == null) {
        return;
      }
      if (pr.nextInt(10) == 0) {
        term++;
      }
      List<SessionMachine.ProbeAnswer> answers = new ArrayList<>();
      for (String a : p.addresses()) {
        if (pr.nextInt(4) > 0) {
          int pick = pr.nextInt(MachineHarness.SERVERS.size() + 1);
          String leader = pick == 0 ? "" : MachineHarness.SERVERS.get(pick - 1);
          answers.add(new SessionMachine.ProbeAnswer(a, term - pr.nextInt(2), leader));
        }
      }
      probesAnswered++;
      machine.probed(p.round(), answers, now);
    }

    void deliverRegistration(boolean faulty) {
      Effect.Register reg = registrations.poll();
      if (reg == null) {
        return;
      }
      boolean lostBefore = faulty && r.nextInt(100) < faultPercent / 2;
      if (lostBefore) {
        count("lost-register");
        machine.registerFailed(reg.nonce(), now);
        return;
      }
      RegisterReply reply = register(reg.request());
      if (faulty && r.nextInt(100) < faultPercent / 2) {
        count("lost-register"); // applied there, the answer lost: the retry must not open a 2nd
        machine.registerFailed(reg.nonce(), now);
      } else {
        machine.registerReplied(reg.nonce(), reply, now);
      }
    }

    RegisterReply register(RegisterRequest req) {
      long id = nextClientId++;
      // As the front door does: the client's secret, or one chosen here if it sent none.
      boolean chosen = req.getSecretHi() != 0 || req.getSecretLo() != 0;
      long hi = chosen ? req.getSecretHi() : id * 31;
      long lo = chosen ? req.getSecretLo() : id * 37;
      Registration g = table.register(id, hi, lo, null, req.getTtlMs(), req.getNonce(), nowMs());
      if (g instanceof Registration.Granted ok) {
        return RegisterReply.newBuilder()
            .setCode(Code.OK)
            .setClientId(ok.clientId())
            .setEpoch(ok.epoch())
            .setNextSeq(ok.nextSeq())
            .setSecretHi(hi)
            .setSecretLo(lo)
            .setWindow(serverWindow)
            .build();
      }
      return RegisterReply.newBuilder()
          .setCode(Code.valueOf(((Registration.Refused) g).code().name()))
          .build();
    }

    void deliverToServer() {
      Integer s = pick(toServer);
      if (s == null) {
        return;
      }
      ClientFrame f = toServer.get(s).poll();
      if (silent.contains(s)) {
        return;
      }
      if (f.hasHello()) {
        if (table.authenticate(
            f.getHello().getClientId(), f.getHello().getSecretHi(), f.getHello().getSecretLo())) {
          boundTo.put(s, new long[] {f.getHello().getClientId(), f.getHello().getEpoch()});
        } else {
          reply(s, frame(0, Code.SESSION_EXPIRED, 0));
        }
        return;
      }
      long[] who = boundTo.get(s);
      if (who == null) {
        return; // the Hello was refused: the stream is over
      }
      if (f.hasKeepAlive()) {
        Optional<RejectCode> k =
            table.keepAlive(who[0], who[1], f.getKeepAlive().getAck(), nowMs());
        reply(s, frame(0, k.map(c -> Code.valueOf(c.name())).orElse(Code.OK), 0));
      } else if (f.hasRequest()) {
        request(s, who, f);
      } else if (f.hasClose()) {
        table.close(who[0], who[1], nowMs());
      }
    }

    void request(int s, long[] who, ClientFrame f) {
      long seq = f.getRequest().getSeq();
      long ack = f.getRequest().getAck();
      Admission a = table.admit(who[0], who[1], seq, ack, nowMs());
      if (a instanceof Admission.New) {
        String value =
            f.getRequest().getOp().getAppend().getValue().toString(StandardCharsets.UTF_8);
        applied.add(value);
        Result result =
            Result.newBuilder()
                .setCode(Code.OK)
                .setNumber(applied.size())
                .setRevision(applied.size())
                .build();
        table.record(who[0], seq, ack, nowMs(), result.toByteArray());
        reply(s, ServerFrame.newBuilder().setSeq(seq).setResult(result).build());
      } else if (a instanceof Admission.Duplicate d) {
        duplicatesServed++;
        try {
          reply(
              s,
              ServerFrame.newBuilder()
                  .setSeq(seq)
                  .setResult(Result.parseFrom(d.response()))
                  .setDuplicate(true)
                  .build());
        } catch (com.google.protobuf.InvalidProtocolBufferException e) {
          throw new AssertionError(e);
        }
      } else {
        RejectCode code = ((Admission.Rejected) a).code();
        // A frame of a replaced stream that arrives late is a stale network duplicate, which the
        // server may refuse so; on the stream in use, such a refusal is a client bug.
        if (s == currentStream
            && (code == RejectCode.WINDOW_EXCEEDED
                || code == RejectCode.RESPONSE_DISCARDED
                || code == RejectCode.INVALID_ARGUMENT)) {
          protocolErrors.add(code + " for seq " + seq + " ack " + ack);
        }
        long next = code == RejectCode.OUT_OF_ORDER ? table.nextSeq(who[0]) : 0;
        reply(s, frame(seq, Code.valueOf(code.name()), next));
      }
    }

    static ServerFrame frame(long seq, Code code, long nextSeq) {
      return ServerFrame.newBuilder()
          .setSeq(seq)
          .setResult(Result.newBuilder().setCode(code))
          .setNextSeq(nextSeq)
          .build();
    }

    void reply(int s, ServerFrame f) {
      if (!silent.contains(s)) {
        toClient.get(s).add(f);
      }
    }

    void deliverToClient() {
      Integer s = pick(toClient);
      if (s != null) {
        machine.frame(s, toClient.get(s).poll(), now);
      }
    }

    <T> Integer pick(Map<Integer, ArrayDeque<T>> queues) {
      List<Integer> ready = new ArrayList<>();
      queues.forEach(
          (id, q) -> {
            if (!q.isEmpty()) {
              ready.add(id);
            }
          });
      // Mostly the current stream; sometimes a replaced one, late.
      if (ready.isEmpty()) {
        return null;
      }
      if (ready.contains(currentStream) && r.nextInt(10) > 0) {
        return currentStream;
      }
      return ready.get(r.nextInt(ready.size()));
    }

    // ---- faults ----

    void fault() {
      int s = currentStream;
      if (s < 0) {
        return;
      }
      if (r.nextInt(12) == 0 && machine.clientId() != 0) {
        count("expire"); // the server forgets the session: calls in flight are lost, then anew
        table.close(machine.clientId(), machine.epoch(), nowMs());
        return;
      }
      switch (r.nextInt(3)) {
        case 0 -> {
          count("break");
          toServer.get(s).clear();
          toClient.get(s).clear();
          machine.streamEnded(s, now);
        }
        case 1 -> {
          count("half-open"); // silent both ways, and no end is ever reported
          silent.add(s);
          toServer.get(s).clear();
          toClient.get(s).clear();
        }
        default -> {
          count("not-leader");
          toClient
              .get(s)
              .add(
                  ServerFrame.newBuilder()
                      .setResult(Result.newBuilder().setCode(Code.NOT_LEADER))
                      .build());
        }
      }
    }

    void count(String fault) {
      faults.merge(fault, 1, Integer::sum);
    }

    // ---- the promise ----

    void check() {
      assertThat(protocolErrors).as("protocol errors").isEmpty();
      assertThat(made).as("calls made").hasSize(calls);
      assertThat(allDone()).as("every call ended after the faults stopped").isTrue();
      assertThat(new HashSet<>(applied)).as("applied at most once").hasSize(applied.size());
      int last = -1;
      for (String v : applied) {
        int i = callIndex.get(v);
        assertThat(i).as("FIFO: %s applied after call %d", v, last).isGreaterThan(last);
        last = i;
      }
      for (int i = 0; i < made.size(); i++) {
        SessionMachine.Call c = made.get(i);
        String value = "v" + i;
        // A caller waits no longer than its deadline (time moves by at most 200 ms a step).
        assertThat(doneAt.get(c) - c.deadline)
            .as("%s ended after its deadline", value)
            .isLessThanOrEqualTo(200 * MS);
        if (!c.future().isCompletedExceptionally()) {
          ServerFrame f = c.future().join();
          assertThat(f.getResult().getCode()).isEqualTo(Code.OK);
          int at = applied.indexOf(value);
          assertThat(at).as("answered %s was applied", value).isNotNegative();
          assertThat(f.getResult().getNumber())
              .as("the answer of %s is its own", value)
              .isEqualTo(at + 1);
        } else {
          Throwable t = failure(c);
          if (t instanceof NotSentException) {
            assertThat(applied).as("%s failed as not sent", value).doesNotContain(value);
          }
          if (!expired) {
            assertThat(shortDeadline)
                .as("%s failed with %s without a short deadline or an expiry", value, t)
                .contains(i);
          }
        }
      }
    }

    static Throwable failure(SessionMachine.Call c) {
      try {
        c.future().join();
        throw new AssertionError("not failed");
      } catch (CompletionException e) {
        return e.getCause();
      }
    }
  }
}
