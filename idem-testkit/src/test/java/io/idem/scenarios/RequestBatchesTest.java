package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.client.IdemClient;
import io.idem.core.SessionTableConfig;
import io.idem.proto.Code;
import io.idem.proto.Hello;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.Request;
import io.idem.proto.ServerFrame;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Requests in batches (Hello.request_batches, ServerFrame.takes_request_batches,
 * ClientFrame.requests): the server says it takes them and handles each request of a batch as if it
 * had come alone; the client sends the calls that one round of callbacks makes in one frame, and a
 * callback that waits for a call of its own session does not hang.
 */
@Timeout(120)
class RequestBatchesTest {
  @TempDir static Path dir;

  /** One node for the class: each test has its own session and its own counters. */
  static LocalCluster cluster;

  private static final AtomicLong NONCES = new AtomicLong();

  @BeforeAll
  static void start() {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
  }

  @AfterAll
  static void stop() {
    if (cluster != null) {
      cluster.close();
    }
  }

  @Test
  void aServerSaysItTakesRequestBatchesAndAppliesEachRequestOnceInOrder() throws Exception {
    double batches = counter("idem.request.batches");
    double batched = counter("idem.requests.batched");
    try (RawSession raw = session(true)) {
      ServerFrame told = raw.next();
      assertThat(told.getSeq()).isZero();
      assertThat(told.getResult().getCode()).isEqualTo(Code.OK);
      assertThat(told.getTakesRequestBatches()).isTrue();

      List<Request> requests = new ArrayList<>();
      for (long seq = 1; seq <= 50; seq++) {
        requests.add(request(seq, "raw-batch"));
      }
      raw.sendAll(requests);
      for (long seq = 1; seq <= 50; seq++) {
        ServerFrame a = raw.next();
        assertThat(a.getSeq()).isEqualTo(seq);
        assertThat(a.getResult().getCode()).isEqualTo(Code.OK);
        assertThat(a.getResult().getNumber()).as("the counter's value").isEqualTo(seq);
        assertThat(a.getDuplicate()).isFalse();
      }

      // The same batch again (a retry after a lost answer): saved answers, nothing applied twice.
      raw.sendAll(requests);
      for (long seq = 1; seq <= 50; seq++) {
        ServerFrame a = raw.next();
        assertThat(a.getSeq()).isEqualTo(seq);
        assertThat(a.getResult().getNumber()).isEqualTo(seq);
        assertThat(a.getDuplicate()).isTrue();
      }
      raw.send(51, 51, request(51, "raw-batch").getOp());
      assertThat(raw.answerTo(51).getResult().getNumber()).isEqualTo(51);
    }
    assertThat(counter("idem.request.batches") - batches).isEqualTo(2);
    assertThat(counter("idem.requests.batched") - batched).isEqualTo(100);
  }

  @Test
  void aClientThatDoesNotAskIsNotToldAndItsFirstFrameIsItsFirstAnswer() throws Exception {
    try (RawSession raw = session(false)) {
      raw.send(1, 1, request(1, "raw-single").getOp());
      ServerFrame first = raw.next();
      assertThat(first.getSeq()).isEqualTo(1);
      assertThat(first.getTakesRequestBatches()).isFalse();
      assertThat(raw.poll(Duration.ofMillis(300))).isNull();
    }
  }

  @Test
  void aBatchLargerThanTheLargestWindowEndsTheStreamWithAClearError() throws Exception {
    try (RawSession raw = session(true)) {
      assertThat(raw.next().getTakesRequestBatches()).isTrue();
      List<Request> requests = new ArrayList<>();
      for (long seq = 1; seq <= SessionTableConfig.MAX_WINDOW + 1; seq++) {
        requests.add(request(seq, "raw-oversized"));
      }
      raw.sendAll(requests);
      ServerFrame f = raw.next();
      assertThat(f.getSeq()).isZero();
      assertThat(f.getResult().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
      assertThat(f.getResult().getMessage())
          .isEqualTo("a request batch of 65537 requests; at most 65536 (the largest window)");
      assertThat(raw.awaitEnd(Duration.ofSeconds(10))).isTrue();
    }
  }

  @Test
  void anEmptyBatchEndsTheStreamWithAClearError() throws Exception {
    try (RawSession raw = session(true)) {
      assertThat(raw.next().getTakesRequestBatches()).isTrue();
      raw.sendAll(List.of());
      ServerFrame f = raw.next();
      assertThat(f.getSeq()).isZero();
      assertThat(f.getResult().getCode()).isEqualTo(Code.INVALID_ARGUMENT);
      assertThat(f.getResult().getMessage()).isEqualTo("an empty request batch");
      assertThat(raw.awaitEnd(Duration.ofSeconds(10))).isTrue();
    }
  }

  /**
   * Sixteen chains of calls, each call made by the callback of the one before: the answers to one
   * log entry come in one frame and complete in one round, whose calls leave in one frame.
   */
  @Test
  void theCallsOfOneRoundOfCallbacksLeaveInOneFrame() throws Exception {
    double batches = counter("idem.request.batches");
    double batched = counter("idem.requests.batched");
    try (IdemClient c = IdemClient.builder().servers(cluster.clientAddress(0)).build()) {
      List<CompletableFuture<Void>> chains = new ArrayList<>();
      for (int i = 0; i < 16; i++) {
        chains.add(chain(c, "chained", 30));
      }
      CompletableFuture.allOf(chains.toArray(new CompletableFuture<?>[0]))
          .get(60, TimeUnit.SECONDS);
      assertThat(c.increment("chained", 0)).as("each call applied once").isEqualTo(16 * 30);
    }
    double frames = counter("idem.request.batches") - batches;
    double requests = counter("idem.requests.batched") - batched;
    // Sent as they came, without waiting for the end of the round, a frame carries several only
    // when sends happen to overlap (91 requests in 11 frames in one run), against 435 in 30 frames
    // when the round's sends wait for its end.
    assertThat(frames).as("frames with several requests").isPositive();
    assertThat(requests)
        .as("requests sent in such frames, of %d", 16 * 30)
        .isGreaterThanOrEqualTo(16 * 30 / 2)
        .isLessThanOrEqualTo(16 * 30);
  }

  private static CompletableFuture<Void> chain(IdemClient c, String key, int left) {
    if (left == 0) {
      return CompletableFuture.completedFuture(null);
    }
    return c.incrementAsync(key, 1).thenCompose(v -> chain(c, key, left - 1));
  }

  /**
   * A callback's own call waits for the end of its round; a callback that waits for that call must
   * not wait forever: a wait on the call's future sends it at once, and any other wait (here a
   * latch that another callback counts down) gets it sent by the session's next tick. Without the
   * tick's flush the latch wait times out (checked: 10 s, then false); the other two waits are also
   * ended by the tick, so FlushingFutureTest checks that a wait on a future sends first.
   */
  @Test
  void aCallbackThatWaitsForACallOfItsOwnSessionDoesNotHang() throws Exception {
    try (IdemClient c = patient()) {
      c.increment("waits", 1); // the stream is open and takes request batches
      CompletableFuture<Long> blocking =
          c.incrementAsync("waits", 1).thenApply(v -> c.increment("waits-inner", 1));
      assertThat(blocking.get(10, TimeUnit.SECONDS)).isEqualTo(1);

      CompletableFuture<Boolean> latched =
          c.incrementAsync("waits", 1)
              .thenApply(
                  v -> {
                    CountDownLatch answered = new CountDownLatch(1);
                    c.incrementAsync("waits-inner", 1).thenRun(answered::countDown);
                    try {
                      return answered.await(10, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                      Thread.currentThread().interrupt();
                      return false;
                    }
                  });
      assertThat(latched.get(20, TimeUnit.SECONDS)).isTrue();

      IdemClient other = patient();
      try {
        CompletableFuture<Void> closing = new CompletableFuture<>();
        other.increment("waits", 1);
        other
            .incrementAsync("waits", 1)
            .thenRun(
                () -> {
                  other.incrementAsync("waits-inner", 1);
                  // A graceful close waits for the call just made, held back by this round.
                  other.close(Duration.ofSeconds(5));
                  closing.complete(null);
                });
        closing.get(10, TimeUnit.SECONDS);
      } finally {
        other.close(); // a second close does nothing
      }
      assertThat(c.increment("waits-inner", 0)).isEqualTo(3);
    }
  }

  /**
   * A client whose own stall detection (a probe after 400 ms without an answer, a reconnect after 5
   * s) and keep-alives (a third of the session TTL by default) do not come within the waits of the
   * test above (10 s each): without the flushes that test is about, those would end them.
   */
  private static IdemClient patient() {
    return IdemClient.builder()
        .servers(cluster.clientAddress(0))
        .sessionTtl(Duration.ofSeconds(120))
        .keepAliveInterval(Duration.ofSeconds(60))
        .stallTimeout(Duration.ofSeconds(100))
        .probeInterval(Duration.ofSeconds(100))
        .build();
  }

  private static double counter(String name) {
    return cluster.node(0).meterRegistry().get(name).counter().count();
  }

  private static Request request(long seq, String counter) {
    return Request.newBuilder()
        .setSeq(seq)
        .setAck(1)
        .setOp(
            Operation.newBuilder().setIncrement(Increment.newBuilder().setKey(counter).setDelta(1)))
        .build();
  }

  /** A new session, its stream open with a Hello that asks to send request batches or not. */
  private static RawSession session(boolean requestBatches) {
    RawSession raw = new RawSession(cluster.clientAddress(0));
    RegisterReply grant = raw.registerSession(NONCES.incrementAndGet());
    raw.open(
        Hello.newBuilder()
            .setClientId(grant.getClientId())
            .setEpoch(grant.getEpoch())
            .setSecretHi(grant.getSecretHi())
            .setSecretLo(grant.getSecretLo())
            .setRequestBatches(requestBatches)
            .build());
    return raw;
  }
}
