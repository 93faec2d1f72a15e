package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class AnswerRoundTest {
  @Test
  void withoutARoundNothingJoinsAndTheCallerSendsAtOnce() {
    assertThat(AnswerRound.join(() -> {})).isFalse();
  }

  @Test
  void membersAreFlushedWhenTheRoundClosesInTheOrderTheyJoined() {
    List<String> flushed = new ArrayList<>();
    AnswerRound r = AnswerRound.open();
    assertThat(AnswerRound.join(() -> flushed.add("a"))).isTrue();
    assertThat(AnswerRound.join(() -> flushed.add("b"))).isTrue();
    assertThat(flushed).isEmpty();
    r.close();
    assertThat(flushed).containsExactly("a", "b");
    assertThat(AnswerRound.join(() -> flushed.add("c"))).isFalse();
  }

  @Test
  void aRoundBelongsToTheThreadThatOpenedIt() throws Exception {
    AnswerRound r = AnswerRound.open();
    try {
      boolean elsewhere =
          CompletableFuture.supplyAsync(() -> AnswerRound.join(() -> {})).get(10, TimeUnit.SECONDS);
      assertThat(elsewhere).isFalse();
    } finally {
      r.close();
    }
  }

  @Test
  void anInnerRoundFlushesItsOwnMembersAndTheOuterOneStaysOpen() {
    List<String> flushed = new ArrayList<>();
    AnswerRound outer = AnswerRound.open();
    AnswerRound.join(() -> flushed.add("outer"));
    AnswerRound inner = AnswerRound.open();
    AnswerRound.join(() -> flushed.add("inner"));
    inner.close();
    assertThat(flushed).containsExactly("inner");
    assertThat(AnswerRound.join(() -> flushed.add("outer again"))).isTrue();
    outer.close();
    assertThat(flushed).containsExactly("inner", "outer", "outer again");
    assertThat(AnswerRound.join(() -> {})).isFalse();
  }

  @Test
  void aMemberThatFailsToFlushDoesNotKeepTheOthersFromSending() {
    List<String> flushed = new ArrayList<>();
    AnswerRound r = AnswerRound.open();
    AnswerRound.join(
        () -> {
          throw new IllegalStateException("stream broken");
        });
    AnswerRound.join(() -> flushed.add("second"));
    assertThatCode(r::close).as("logged, not thrown at the batcher").doesNotThrowAnyException();
    assertThat(flushed).containsExactly("second");
    assertThat(AnswerRound.join(() -> {})).isFalse();
  }
}
