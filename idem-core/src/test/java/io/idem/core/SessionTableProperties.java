package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;

/** {@link SessionTable} against {@link ReferenceModel}, on random histories of every operation. */
class SessionTableProperties {
  private static final SessionTableConfig CONFIG =
      SessionTableConfig.builder()
          .window(4)
          .maxSessions(4)
          .maxTtlMs(1_000)
          .maxNameLength(4)
          .build();
  private static final String[] NAMES = {"a", "bé", "c日\uD83D\uDE00"};
  private static final long[] TTLS = {0, 100, 250, 1_000, 1_001};

  sealed interface Op {}

  record Register(int name, int ttl, boolean otherSecret, int nonce) implements Op {}

  record Resume(int name, boolean wrongSecret, int nonce) implements Op {}

  record Submit(int pick, int epochDelta, int seqDelta, int ackBack) implements Op {}

  record KeepAlive(int pick, int epochDelta, int ackBack) implements Op {}

  record Close(int pick, int epochDelta) implements Op {}

  record Expire() implements Op {}

  record Advance(int ms) implements Op {}

  record SnapshotRoundTrip() implements Op {}

  record Freeze() implements Op {}

  @Provide
  Arbitrary<List<Op>> histories() {
    Arbitrary<Integer> pick = Arbitraries.integers().between(0, 5);
    Arbitrary<Integer> epochDelta = Arbitraries.of(0, 0, 0, -1, 1);
    Arbitrary<Op> op =
        Arbitraries.frequencyOf(
            Tuple.of(
                4,
                Combinators.combine(
                        Arbitraries.integers().between(-1, NAMES.length - 1),
                        Arbitraries.integers().between(0, TTLS.length - 1),
                        Arbitraries.of(false, false, true),
                        Arbitraries.integers().between(0, 2))
                    .as(Register::new)),
            Tuple.of(
                1,
                Combinators.combine(
                        Arbitraries.integers().between(0, NAMES.length - 1),
                        Arbitraries.of(false, false, true),
                        Arbitraries.integers().between(0, 2))
                    .as(Resume::new)),
            Tuple.of(
                20,
                Combinators.combine(
                        pick,
                        Arbitraries.of(0, 0, 0, 0, -1, 1),
                        Arbitraries.of(0, 0, 0, -1, -2, -3, 1, 2),
                        Arbitraries.integers().between(-1, 5))
                    .as(Submit::new)),
            Tuple.of(
                2,
                Combinators.combine(pick, epochDelta, Arbitraries.integers().between(-1, 5))
                    .as(KeepAlive::new)),
            Tuple.of(1, Combinators.combine(pick, epochDelta).as(Close::new)),
            Tuple.of(2, Arbitraries.just(new Expire())),
            Tuple.of(4, Arbitraries.integers().between(0, 400).map(Advance::new)),
            Tuple.of(1, Arbitraries.just(new SnapshotRoundTrip())),
            Tuple.of(2, Arbitraries.just(new Freeze())));
    return op.list().ofMinSize(1).ofMaxSize(200);
  }

  @Property(tries = 300)
  void tableBehavesLikeTheReferenceModel(@ForAll("histories") List<Op> history) throws IOException {
    SessionTable table = new SessionTable(CONFIG);
    ReferenceModel model = new ReferenceModel(CONFIG);
    long now = 0;
    long nextLogIndex = 1;
    Map<Long, Integer> applied = new HashMap<>();
    // Each freeze, and the bytes the table wrote at that moment.
    Map<SessionTable.Frozen, byte[]> frozen = new java.util.LinkedHashMap<>();
    for (Op op : history) {
      if (op instanceof Register r) {
        String name = r.name() < 0 ? null : NAMES[r.name()];
        long id = nextLogIndex++;
        long secret = r.otherSecret() ? 2 : 1;
        assertThat(table.register(id, secret, 0, name, TTLS[r.ttl()], r.nonce(), now))
            .isEqualTo(model.register(id, secret, 0, name, TTLS[r.ttl()], r.nonce(), now));
      } else if (op instanceof Resume r) {
        long secret = r.wrongSecret() ? 3 : table.clientIdOf(NAMES[r.name()]) % 2 + 1;
        // Secrets are 1 or 2; guessing from the id parity is right about half the time.
        assertThat(table.resume(NAMES[r.name()], secret, 0, r.nonce(), now))
            .isEqualTo(model.resume(NAMES[r.name()], secret, 0, r.nonce(), now));
      } else if (op instanceof Submit s) {
        long id = pick(model, s.pick());
        long epoch = Math.max(0, model.epoch(id) + s.epochDelta());
        long seq = model.nextSeq(id) + s.seqDelta();
        long ack = seq - s.ackBack();
        int count = applied.merge(id, 1, Integer::sum);
        byte[] response = (id + ":" + seq + ":" + count).getBytes(StandardCharsets.UTF_8);
        Admission expected = model.submit(id, epoch, seq, ack, now, response);
        Admission actual = table.admit(id, epoch, seq, ack, now);
        assertSame(actual, expected);
        if (actual == Admission.NEW) {
          table.record(id, seq, ack, now, response);
        }
      } else if (op instanceof KeepAlive k) {
        long id = pick(model, k.pick());
        long epoch = Math.max(0, model.epoch(id) + k.epochDelta());
        long ack = model.nextSeq(id) - k.ackBack();
        assertThat(table.keepAlive(id, epoch, ack, now))
            .isEqualTo(model.keepAlive(id, epoch, ack, now));
      } else if (op instanceof Close c) {
        long id = pick(model, c.pick());
        long epoch = Math.max(0, model.epoch(id) + c.epochDelta());
        assertThat(table.close(id, epoch, now)).isEqualTo(model.close(id, epoch, now));
      } else if (op instanceof Expire) {
        List<Long> gone = new ArrayList<>();
        table.expire(now, gone::add);
        assertThat(gone).isEqualTo(model.expire(now));
      } else if (op instanceof Advance a) {
        now += a.ms();
      } else if (op instanceof SnapshotRoundTrip) {
        String digest = table.digest();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        table.writeSnapshot(out);
        table = SessionTable.readSnapshot(new ByteArrayInputStream(out.toByteArray()));
        assertThat(table.digest()).isEqualTo(digest);
      } else if (op instanceof Freeze) {
        frozen.put(table.freeze(), snapshotOf(table));
      } else {
        throw new AssertionError(op);
      }
      assertEquivalent(table, model);
    }
    // A frozen table writes what the table held when frozen, whatever happened after, every time,
    // and states how many bytes that is without writing them.
    for (Map.Entry<SessionTable.Frozen, byte[]> f : frozen.entrySet()) {
      assertThat(f.getKey().snapshotBytes()).isEqualTo(f.getValue().length);
      for (int i = 0; i < 2; i++) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        f.getKey().writeSnapshot(out);
        assertThat(out.toByteArray()).isEqualTo(f.getValue());
      }
    }
  }

  private static byte[] snapshotOf(SessionTable table) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    table.writeSnapshot(out);
    return out.toByteArray();
  }

  private static long pick(ReferenceModel model, int pick) {
    List<Long> ids = model.ids();
    return pick < ids.size() ? ids.get(pick) : 1_000 + pick;
  }

  private static void assertSame(Admission actual, Admission expected) {
    if (expected instanceof Admission.Duplicate d) {
      assertThat(actual).isInstanceOf(Admission.Duplicate.class);
      assertThat(((Admission.Duplicate) actual).response()).isEqualTo(d.response());
    } else {
      assertThat(actual).isEqualTo(expected);
    }
  }

  private static void assertEquivalent(SessionTable table, ReferenceModel model) {
    List<SessionInfo> infos = new ArrayList<>();
    for (long id : table.sessions().sortedIds()) {
      infos.add(table.session(id).orElseThrow());
    }
    assertThat(infos).isEqualTo(model.infos());
    assertThat(table.size()).isEqualTo(infos.size()).isLessThanOrEqualTo(CONFIG.maxSessions());
    assertThat(table.savedResponses()).isEqualTo(model.savedResponses());
  }

  @Property(tries = 200)
  void sessionIndexBehavesLikeAHashMap(
      @ForAll("indexOps") List<Integer> ops, @ForAll boolean denseKeys) {
    SessionIndex index = new SessionIndex();
    Map<Long, Session> reference = new HashMap<>();
    for (int op : ops) {
      long key = denseKeys ? Math.abs(op) % 64 : (long) op * 0x100000001L;
      if (op >= 0) {
        if (!reference.containsKey(key)) {
          Session s = new Session(key, null, SessionSecret.hash(0, 0), null, 1, 0, 0, 0);
          reference.put(key, s);
          index.add(s);
        }
      } else {
        reference.remove(key);
        index.remove(key);
      }
      assertThat(index.size()).isEqualTo(reference.size());
    }
    for (long key = -70; key < 70; key++) {
      assertThat(index.get(key)).isSameAs(reference.get(key));
    }
    for (long key : reference.keySet()) {
      assertThat(index.get(key)).isSameAs(reference.get(key));
    }
    assertThat(index.sortedIds()).isSorted().hasSize(reference.size());
  }

  @Provide
  Arbitrary<List<Integer>> indexOps() {
    return Arbitraries.integers().between(-200, 200).list().ofMaxSize(600);
  }
}
