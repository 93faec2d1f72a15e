package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.proto.AcquireKey;
import io.idem.proto.Code;
import io.idem.proto.CompleteKey;
import io.idem.proto.Increment;
import io.idem.proto.KeyOutcome;
import io.idem.proto.Operation;
import io.idem.proto.ServerFrame;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Answers in batches (Hello.batches, ServerFrame.batch): a client that takes them gets the answers
 * to the commands of one log entry in one frame; a client that does not (every client before the
 * field, the Python conformance client) gets a frame per answer, as before.
 */
@Timeout(120)
class AnswerBatchesTest {
  @TempDir static Path dir;

  /** One node for the class: each test has its own session and its own counter or key. */
  static LocalCluster cluster;

  @BeforeAll
  static void start() throws Exception {
    cluster = LocalCluster.start(1, dir);
    cluster.waitForLeader(Duration.ofSeconds(30));
  }

  @AfterAll
  static void stop() throws Exception {
    if (cluster != null) {
      cluster.close();
    }
  }

  /**
   * Requests pipelined per round (the session window is 128: {@code seq - ack} stays below it):
   * while one entry is in flight, the requests that arrive meanwhile go together in the next.
   */
  private static final int N = 127;

  /** Rounds at most, for a round whose requests all happened to go one per entry. */
  private static final int ROUNDS = 5;

  private static final AtomicLong NONCES = new AtomicLong();

  /**
   * The front door's bound on a batch (FrontDoor.MAX_BATCH_BYTES, package-private in idem-server).
   */
  private static final int MAX_BATCH_BYTES = 1 << 20;

  @Test
  void aClientThatTakesBatchesGetsEveryAnswerOnceInOrderSomeOfThemTogether() throws Exception {
    try (RawSession raw = session(true)) {
      long seq = 0;
      int batchFrames = 0;
      for (int round = 0; round < ROUNDS && batchFrames == 0; round++) {
        long first = seq + 1;
        for (int i = 0; i < N; i++) {
          seq++;
          raw.send(seq, first, increment("batched"));
        }
        List<ServerFrame> answers = new ArrayList<>();
        while (answers.size() < N) {
          ServerFrame f = raw.next();
          if (f.getBatchCount() > 0) {
            batchFrames++;
            assertThat(f.getBatchCount()).isGreaterThan(1); // one answer goes alone
            assertThat(f.getSeq()).isZero();
            assertThat(f.hasResult()).isFalse();
            answers.addAll(f.getBatchList());
          } else {
            answers.add(f);
          }
        }
        // The counter's value is the request's number: each applied once, in order, and the
        // answers in the order they were given.
        for (int i = 0; i < N; i++) {
          ServerFrame a = answers.get(i);
          assertThat(a.getSeq()).isEqualTo(first + i);
          assertThat(a.getResult().getCode()).isEqualTo(Code.OK);
          assertThat(a.getResult().getNumber()).isEqualTo(first + i);
          assertThat(a.getBatchCount()).isZero();
        }
      }
      assertThat(batchFrames)
          .as("frames that carried several answers, over %d requests", seq)
          .isPositive();
      assertThat(raw.poll(Duration.ofMillis(500))).as("no answer twice").isNull();
    }
  }

  /**
   * A batch stays near 1 MiB (FrontDoor.MAX_BATCH_BYTES): 127 replays of a 60 KiB response, 7.6 MB
   * of answers to one entry, come in several frames, each below grpc-java's default 4 MiB inbound
   * limit, which this raw client keeps. One frame of them all would end its stream.
   */
  @Test
  void aBatchStaysBelowTheDefaultMessageLimitWhateverTheAnswers() throws Exception {
    try (RawSession raw = session(true)) {
      ByteString response = ByteString.copyFrom(new byte[60 * 1024]);
      raw.send(1, 1, acquire());
      ServerFrame acquired = raw.answerTo(1);
      assertThat(acquired.getResult().getKeyOutcome()).isEqualTo(KeyOutcome.ACQUIRED);
      raw.send(
          2,
          2,
          Operation.newBuilder()
              .setCompleteKey(
                  CompleteKey.newBuilder()
                      .setScope("t")
                      .setKey("k")
                      .setToken(acquired.getResult().getToken())
                      .setResponse(response))
              .build());
      assertThat(raw.answerTo(2).getResult().getKeyOutcome()).isEqualTo(KeyOutcome.SETTLED);

      for (long seq = 3; seq < 3 + N; seq++) {
        raw.send(seq, 3, acquire());
      }
      int answers = 0;
      int frames = 0;
      while (answers < N) {
        ServerFrame f = raw.next();
        frames++;
        assertThat(f.getSerializedSize()).isLessThan(MAX_BATCH_BYTES + 70 * 1024);
        for (ServerFrame a : f.getBatchCount() > 0 ? f.getBatchList() : List.of(f)) {
          assertThat(a.getSeq()).isEqualTo(3 + answers);
          assertThat(a.getResult().getKeyOutcome()).isEqualTo(KeyOutcome.COMPLETED);
          assertThat(a.getResult().getResponse()).isEqualTo(response);
          answers++;
        }
      }
      assertThat(frames).isGreaterThanOrEqualTo(8); // 7.6 MB in frames of about 1 MiB at most
      assertThat(raw.awaitEnd(Duration.ofMillis(200))).as("the stream is still open").isFalse();
    }
  }

  private static Operation acquire() {
    return Operation.newBuilder()
        .setAcquireKey(
            AcquireKey.newBuilder()
                .setScope("t")
                .setKey("k")
                .setFingerprint(ByteString.copyFromUtf8("f"))
                .setInProgressMs(60_000)
                .setRetentionMs(60_000))
        .build();
  }

  @Test
  void aClientThatDoesNotSayItTakesBatchesGetsAFramePerAnswer() throws Exception {
    try (RawSession raw = session(false)) {
      for (long seq = 1; seq <= N; seq++) {
        raw.send(seq, 1, increment("single"));
      }
      for (long seq = 1; seq <= N; seq++) {
        ServerFrame f = raw.next();
        assertThat(f.getBatchCount()).isZero();
        assertThat(f.getSeq()).isEqualTo(seq);
        assertThat(f.getResult().getNumber()).isEqualTo(seq);
      }
      assertThat(raw.poll()).isNull();
    }
  }

  /** A new session on the cluster, its stream open with a Hello that takes batches or not. */
  private static RawSession session(boolean batches) {
    RawSession raw = new RawSession(cluster.clientAddress(0));
    raw.open(raw.registerSession(NONCES.incrementAndGet()), batches);
    return raw;
  }

  private static Operation increment(String counter) {
    return Operation.newBuilder()
        .setIncrement(Increment.newBuilder().setKey(counter).setDelta(1))
        .build();
  }
}
