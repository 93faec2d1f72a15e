package io.idem.verify;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.client.KeyValue;
import io.idem.client.NotSentException;
import io.idem.client.OutcomeUnknownException;
import io.idem.proto.StatusReply;
import io.idem.testkit.Eventually;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Membership changes on real server processes under a steady load of pipelined appends and
 * increments: 3 nodes grow to 5 (two new processes started with {@code --join}, each added), shrink
 * back to 3 (the leader removed first, then another of the first three), and a node is killed with
 * SIGKILL, wiped and replaced by an empty node under a new id. The clients only ever know the first
 * three nodes' addresses, so after the shrink they reach the leader on an added node through the
 * NOT_LEADER redirect. The recorded history must show no exactly-once violation, and the members
 * left must reach the same state digest at the same log index.
 */
@Tag("slow")
@Timeout(240)
class MembershipScenarioTest {
  @TempDir Path dir;

  private static final int LISTS = 4;
  private static final int COUNTERS = 2;
  private static final int WINDOW = 8;

  private final List<Op> history = Collections.synchronizedList(new ArrayList<>());
  private final AtomicLong ids = new AtomicLong();
  private final AtomicBoolean stop = new AtomicBoolean();
  private final long t0 = System.nanoTime();

  @Test
  void growShrinkAndReplaceAWipedNodeUnderLoad() throws Exception {
    long started = System.nanoTime();
    try (ProcessCluster cl = new ProcessCluster(dir.resolve("cluster"), 3, 500)) {
      cl.startAll();
      awaitLeader(cl);
      List<String> firstThree = cl.clientAddresses();
      List<Thread> load = new ArrayList<>();
      for (int c = 0; c < 4; c++) {
        int id = c;
        Thread t = new Thread(() -> pipelined(firstThree, id, id % 2 == 0), "load-" + c);
        t.start();
        load.add(t);
      }
      awaitOps(50);

      // Grow 3 -> 5: each new node starts empty with --join and waits until it is added.
      int n4 = cl.addJoiner();
      int n5 = cl.addJoiner();
      for (int i : List.of(n4, n5)) {
        cl.start(i);
        cl.awaitAnswering(i, Duration.ofSeconds(60));
        cl.changeMembers(List.of(cl.member(i)), List.of(), Duration.ofSeconds(60));
      }
      assertThat(memberIds(cl)).containsExactlyInAnyOrder("n1", "n2", "n3", "n4", "n5");
      awaitOps(history.size() + 50);

      // Shrink 5 -> 3: the leader first (it commits its own removal, then steps down), then one
      // more of the first three, so that the clients' list keeps a single live node.
      int leader = awaitLeader(cl);
      List<Integer> victims = new ArrayList<>(List.of(leader));
      for (int i = 0; i < 3 && victims.size() < 2; i++) {
        if (i != leader) {
          victims.add(i);
        }
      }
      for (int v : victims) {
        cl.changeMembers(List.of(), List.of(cl.id(v)), Duration.ofSeconds(60));
        cl.kill(v); // a removed node's process is stopped by the operator
      }
      assertThat(memberIds(cl))
          .hasSize(3)
          .doesNotContain(cl.id(victims.get(0)), cl.id(victims.get(1)));
      // Leadership on an added node: the one original member left is killed and restarted, so the
      // others (n4, n5) elect one of them, and the clients, who know only n1-n3, follow the hint.
      int original = 3 - victims.get(0) - victims.get(1);
      cl.kill(original);
      int newLeader = awaitLeader(cl);
      assertThat(newLeader).isIn(n4, n5);
      cl.start(original);
      long before = history.size();
      awaitOps(before + 100);

      // Replace a wiped node: kill -9, delete its data, an empty node under a new id, added, then
      // the old id removed.
      String replaced = cl.id(n4);
      String added = cl.replaceWiped(n4, Duration.ofSeconds(60));
      assertThat(added).isNotEqualTo(replaced);
      assertThat(memberIds(cl)).containsExactlyInAnyOrder(cl.id(original), "n5", added);
      long replacedAt = status(cl, awaitLeader(cl)).getAppliedIndex();
      awaitOps(history.size() + 100);

      // The members left reach the same digest at the same snapshot index, past the replace.
      List<Integer> members = List.of(original, n4, n5);
      Eventually.until(
          "equal digests at a common snapshot index on " + members,
          Duration.ofSeconds(90),
          () -> commonDigest(cl, members, replacedAt),
          () -> digests(cl, members));
      stop.set(true);
      for (Thread t : load) {
        t.join(TimeUnit.SECONDS.toMillis(60));
        assertThat(t.isAlive()).as(t.getName() + " stopped").isFalse();
      }

      // No exactly-once violation: every acknowledged append once in its list, none twice, the
      // counters within the acknowledged and attempted increments.
      Map<String, List<Long>> lists = new HashMap<>();
      Map<String, Long> counters = new HashMap<>();
      try (IdemClient reader =
          IdemClient.builder().servers(firstThree).requestTimeout(Duration.ofSeconds(30)).build()) {
        for (int k = 0; k < LISTS; k++) {
          List<Long> elements = new ArrayList<>();
          reader
              .get("list/" + k)
              .map(KeyValue::elements)
              .ifPresent(
                  es ->
                      es.forEach(
                          b ->
                              elements.add(Long.parseLong(new String(b, StandardCharsets.UTF_8)))));
          lists.put("list/" + k, elements);
        }
        for (int k = 0; k < COUNTERS; k++) {
          counters.put(
              "counter/" + k,
              reader.get("counter/" + k).map(kv -> Long.parseLong(kv.valueAsString())).orElse(0L));
        }
      }
      List<Op> ops;
      synchronized (history) {
        ops = new ArrayList<>(history);
      }
      long acknowledged = ops.stream().filter(o -> o.outcome() == Op.Outcome.OK).count();
      System.out.printf(
          "membership scenario: %d operations (%d acknowledged), %.0f s%n",
          ops.size(), acknowledged, (System.nanoTime() - started) / 1e9);
      assertThat(acknowledged).isGreaterThan(300);
      assertThat(ListAppendChecker.check(ops, lists)).isEmpty();
      assertThat(CounterChecker.check(ops, counters)).isEmpty();
    } finally {
      stop.set(true);
    }
  }

  /** Whether every node in {@code nodes} reported the same digest at one index past {@code min}. */
  private static boolean commonDigest(ProcessCluster cl, List<Integer> nodes, long min) {
    Map<Long, String> seen = new HashMap<>();
    for (int i : nodes) {
      Optional<StatusReply> s = cl.status(i);
      if (s.isEmpty() || s.get().getDigestIndex() <= min) {
        return false;
      }
      seen.merge(
          s.get().getDigestIndex(),
          s.get().getDigest(),
          (a, b) -> {
            assertThat(b).as("digest at index " + s.get().getDigestIndex()).isEqualTo(a);
            return a;
          });
    }
    return seen.size() == 1;
  }

  private static String digests(ProcessCluster cl, List<Integer> nodes) {
    StringBuilder b = new StringBuilder();
    for (int i : nodes) {
      b.append(cl.id(i)).append(": ");
      cl.status(i)
          .ifPresentOrElse(
              s -> b.append(s.getDigestIndex()).append(' ').append(s.getAppliedIndex()),
              () -> b.append("no answer"));
      b.append("; ");
    }
    return b.toString();
  }

  private static List<String> memberIds(ProcessCluster cl) {
    StatusReply s = status(cl, awaitLeader(cl));
    return s.getMembersList().stream()
        .filter(io.idem.proto.Member::getVoter)
        .map(io.idem.proto.Member::getId)
        .toList();
  }

  private static StatusReply status(ProcessCluster cl, int i) {
    return Eventually.get(
        "status of " + cl.id(i), Duration.ofSeconds(10), () -> cl.status(i).orElse(null));
  }

  private static int awaitLeader(ProcessCluster cl) {
    return Eventually.get("a leader", Duration.ofSeconds(60), () -> cl.leader().orElse(null));
  }

  private void awaitOps(long n) {
    Eventually.until(
        n + " operations recorded",
        Duration.ofSeconds(60),
        () -> history.size() >= n,
        () -> history.size() + " recorded");
  }

  private long now() {
    return System.nanoTime() - t0;
  }

  /**
   * A client with {@link #WINDOW} calls in flight, appending unique elements (or incrementing)
   * until {@link #stop}; every call is recorded with its outcome (a timeout is unknown, INFO).
   */
  private void pipelined(List<String> servers, int id, boolean appender) {
    Random r = new Random(id);
    Semaphore slots = new Semaphore(WINDOW);
    long element = (long) id * 1_000_000_000L;
    long seq = 0;
    try (IdemClient client =
        IdemClient.builder()
            .servers(servers)
            .requestTimeout(Duration.ofSeconds(20))
            .stallTimeout(Duration.ofSeconds(2))
            .window(2 * WINDOW)
            .build()) {
      while (!stop.get()) {
        if (!slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
          continue;
        }
        String key = appender ? "list/" + r.nextInt(LISTS) : "counter/" + r.nextInt(COUNTERS);
        long value = appender ? ++element : 1;
        long s = ++seq;
        long start = now();
        CompletableFuture<Long> call =
            appender
                ? client.appendAsync(key, Long.toString(value).getBytes(StandardCharsets.UTF_8))
                : client.incrementAsync(key, value);
        call.whenComplete(
            (result, e) -> {
              Throwable cause =
                  e instanceof CompletionException && e.getCause() != null ? e.getCause() : e;
              Op.Outcome o = cause == null ? Op.Outcome.OK : Op.Outcome.INFO;
              if (cause != null
                  && !(cause instanceof OutcomeUnknownException)
                  && !(cause instanceof NotSentException)) {
                System.out.println("load-" + id + ": " + cause);
              }
              history.add(
                  new Op(
                      ids.incrementAndGet(),
                      "c" + id,
                      appender ? Op.Fn.APPEND : Op.Fn.INCR,
                      key,
                      value,
                      0,
                      s,
                      start,
                      o == Op.Outcome.INFO ? Long.MAX_VALUE : now(),
                      o,
                      appender ? null : result));
              slots.release();
            });
      }
      slots.tryAcquire(WINDOW, 60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
