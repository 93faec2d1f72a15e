package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.protobuf.ByteString;
import io.idem.core.SessionTableConfig;
import io.idem.proto.Code;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The bounds of one session stream: when it may read, what it keeps, when it is stalled. */
class OutboxTest {
  private static final Outbox.Bounds BOUNDS =
      new Outbox.Bounds(SessionTableConfig.MAX_WINDOW, 4L << 20, 1_000);

  private static ServerFrame answer(long seq, int responseBytes) {
    return ServerFrame.newBuilder()
        .setSeq(seq)
        .setResult(
            Result.newBuilder()
                .setCode(Code.OK)
                .setResponse(ByteString.copyFrom(new byte[responseBytes])))
        .build();
  }

  /** An outbox whose transport has taken enough answers to allow the count bound in flight. */
  private static Outbox warmedUp() {
    Outbox o = new Outbox(BOUNDS, FrontDoor.MAX_BATCH_BYTES);
    int n = BOUNDS.maxOwedAnswers();
    o.submitted(n);
    for (int i = 0; i < n; i++) {
      o.answered(answer(i + 1, 0), true, 0);
    }
    o.seal(0);
    while (o.next() != null) {
      o.sent(0);
    }
    assertThat(o.owedAnswers()).isZero();
    return o;
  }

  @Test
  void aStreamStartsWithTheDefaultWindowInFlightAndGrowsByTheAnswersTheTransportTakes() {
    Outbox o = new Outbox(BOUNDS, FrontDoor.MAX_BATCH_BYTES);
    o.submitted(Outbox.INITIAL_IN_FLIGHT - 1);
    assertThat(o.mayRead()).isTrue();
    o.submitted(1);
    assertThat(o.mayRead()).as("at the start's allowance").isFalse();
    o.answered(answer(1, 0), false, 0);
    assertThat(o.mayRead())
        .as("answered, not taken: in flight is below, but the start holds")
        .isTrue();
    o.submitted(1);
    assertThat(o.mayRead()).isFalse();
    o.sent(0);
    o.answered(answer(2, 0), false, 0);
    o.sent(0);
    assertThat(o.inFlight()).isEqualTo(Outbox.INITIAL_IN_FLIGHT - 1);
    o.submitted(2);
    assertThat(o.mayRead()).as("two answers taken: two more than at the start").isTrue();
    o.submitted(1);
    assertThat(o.inFlight()).isEqualTo(Outbox.INITIAL_IN_FLIGHT + 2);
    assertThat(o.mayRead()).isFalse();
    o.answered(answer(3, 0), false, 0);
    assertThat(o.mayRead()).isTrue();
  }

  @Test
  void aStreamReadsUntilItOwesTheMostAnswersAndReadsAgainWhenOneLeaves() {
    Outbox o = warmedUp();
    o.submitted(BOUNDS.maxOwedAnswers() - 1);
    assertThat(o.mayRead()).isTrue();
    o.submitted(1);
    assertThat(o.owedAnswers()).isEqualTo(BOUNDS.maxOwedAnswers());
    assertThat(o.mayRead()).as("at the bound").isFalse();

    o.answered(answer(1, 0), false, 0);
    assertThat(o.mayRead()).as("answered but not written: still owed").isFalse();
    assertThat(o.next().getSeq()).isEqualTo(1);
    o.sent(1);
    assertThat(o.owedAnswers()).isEqualTo(BOUNDS.maxOwedAnswers() - 1);
    assertThat(o.mayRead()).isTrue();
  }

  @Test
  void aStreamReadsUntilItOwesTheMostBytesAndReadsAgainWhenTheyLeave() {
    Outbox o = warmedUp();
    int size = answer(1, 64 << 10).getSerializedSize();
    long fit = BOUNDS.maxOwedBytes() / size; // answers of this size under the bound
    o.submitted((int) fit + 1);
    for (int i = 1; i <= fit; i++) {
      o.answered(answer(i, 64 << 10), false, 0);
    }
    assertThat(fit * size).as("the waiting answers alone").isLessThan(BOUNDS.maxOwedBytes());
    assertThat(o.owedBytes()).isEqualTo((fit + 1) * size);
    assertThat(o.mayRead())
        .as("the command in flight counts as large as the largest answer: over the bound")
        .isFalse();
    o.answered(answer(fit + 1, 0), false, 0);
    assertThat(o.owedBytes()).isLessThan(BOUNDS.maxOwedBytes());
    assertThat(o.mayRead()).as("its answer was small").isTrue();
    o.submitted(1);
    assertThat(o.mayRead()).isFalse();
    o.sent(0);
    assertThat(o.mayRead()).as("one large answer left").isTrue();
  }

  @Test
  void beforeAnyAnswerCommandsInFlightCostNoBytes() {
    Outbox o = new Outbox(BOUNDS, FrontDoor.MAX_BATCH_BYTES);
    o.submitted(Outbox.INITIAL_IN_FLIGHT - 1);
    assertThat(o.owedBytes()).isZero();
    assertThat(o.mayRead()).isTrue();
  }

  @Test
  void keptAnswersLeaveInOneBatchAfterWhatWasQueuedBeforeAndBeforeWhatComesAfter() {
    Outbox o = new Outbox(BOUNDS, FrontDoor.MAX_BATCH_BYTES);
    o.submitted(3);
    o.answered(answer(1, 10), false, 0);
    o.answered(answer(2, 10), true, 0);
    o.answered(answer(3, 10), true, 0);
    assertThat(o.keeping()).isTrue();
    o.frame(ServerFrame.newBuilder().setSeq(0).build(), 0); // seals the kept ones first
    assertThat(o.keeping()).isFalse();
    assertThat(o.next().getSeq()).isEqualTo(1);
    o.sent(0);
    assertThat(o.next().getBatchList()).extracting(ServerFrame::getSeq).containsExactly(2L, 3L);
    o.sent(0);
    assertThat(o.owedAnswers()).isZero();
    assertThat(o.next().getSeq()).isZero();
    o.sent(0);
    assertThat(o.next()).isNull();
    assertThat(o.owedBytes()).isZero();
  }

  @Test
  void aKeptBatchStaysNearTheBatchSize() {
    int batchBytes = 100 << 10;
    Outbox o = new Outbox(BOUNDS, batchBytes);
    int n = 5;
    o.submitted(n);
    for (int i = 1; i <= n; i++) {
      o.answered(answer(i, 40 << 10), true, 0); // two fit in a batch, the third starts another
    }
    o.seal(0);
    int frames = 0;
    while (o.next() != null) {
      assertThat(o.next().getSerializedSize()).isLessThanOrEqualTo(batchBytes + 64);
      o.sent(0);
      frames++;
    }
    assertThat(frames).isEqualTo(3);
    assertThat(o.owedAnswers()).isZero();
  }

  @Test
  void aStallStartsWhenAFrameWaitsAndLastsUntilTheBoundWithNoFrameLeaving() {
    Outbox o = new Outbox(BOUNDS, FrontDoor.MAX_BATCH_BYTES);
    long ms = TimeUnit.MILLISECONDS.toNanos(1);
    assertThat(o.stalledNanos(5_000 * ms)).as("nothing waits").isZero();
    o.submitted(2);
    o.answered(answer(1, 1), false, 10_000 * ms);
    o.answered(answer(2, 1), false, 10_500 * ms);
    assertThat(o.stalled(10_999 * ms)).isFalse();
    assertThat(o.stalled(11_000 * ms)).as("the bound, from the first frame that waited").isTrue();
    o.sent(10_900 * ms); // one left: the stall starts again
    assertThat(o.stalled(11_899 * ms)).isFalse();
    assertThat(o.stalled(11_900 * ms)).isTrue();
    o.sent(12_000 * ms);
    assertThat(o.stalled(99_000 * ms)).as("nothing waits").isFalse();
  }

  @Test
  void clearForgetsWhatWaitsAndKeepsCountingWhatIsInFlight() {
    Outbox o = new Outbox(BOUNDS, FrontDoor.MAX_BATCH_BYTES);
    o.submitted(3);
    o.answered(answer(1, 100), false, 0);
    o.answered(answer(2, 100), true, 0);
    assertThat(o.clear()).isEqualTo(2);
    assertThat(o.next()).isNull();
    assertThat(o.keeping()).isFalse();
    assertThat(o.owedAnswers()).isEqualTo(1);
    o.dropped();
    assertThat(o.owedAnswers()).isZero();
  }

  @Test
  void boundsAreCheckedAtTheirEdges() {
    new Outbox.Bounds(SessionTableConfig.MAX_WINDOW, FrontDoor.MAX_BATCH_BYTES, 1);
    assertThatThrownBy(() -> new Outbox.Bounds(SessionTableConfig.MAX_WINDOW - 1, 64L << 20, 1_000))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("streamMaxOwedAnswers must be at least 65536");
    assertThatThrownBy(
            () ->
                new Outbox.Bounds(
                    SessionTableConfig.MAX_WINDOW, FrontDoor.MAX_BATCH_BYTES - 1, 1_000))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("streamMaxOwedBytes");
    assertThatThrownBy(() -> new Outbox.Bounds(SessionTableConfig.MAX_WINDOW, 64L << 20, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("streamStallTimeoutMs must be positive");
  }
}
