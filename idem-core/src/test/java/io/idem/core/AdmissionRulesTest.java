package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** One test per admission rule of ARCHITECTURE ("The session state machine") and its edges. */
class AdmissionRulesTest {
  private static final long TTL = 1_000;
  private static final long ID = 7;

  private final SessionTable table =
      new SessionTable(SessionTableConfig.builder().window(4).build());

  AdmissionRulesTest() {
    assertThat(table.register(ID, 1, 2, null, TTL, ID, 0))
        .isEqualTo(new Registration.Granted(ID, 0, 1));
  }

  private static byte[] resp(long seq) {
    return ("r" + seq).getBytes(StandardCharsets.UTF_8);
  }

  /** Admits and records {@code seq} as new, with {@code ack}, at time {@code now}. */
  private void apply(long seq, long ack, long now) {
    assertThat(table.admit(ID, 0, seq, ack, now)).isSameAs(Admission.NEW);
    table.record(ID, seq, ack, now, resp(seq));
  }

  private static Admission rejected(RejectCode code) {
    return Admission.rejected(code);
  }

  @Test
  void newRequestAtNextSeqIsAdmittedAndRecorded() {
    apply(1, 1, 10);
    SessionInfo info = table.session(ID).orElseThrow();
    assertThat(info.nextSeq()).isEqualTo(2);
    assertThat(info.lowWater()).isEqualTo(1);
    assertThat(info.savedResponses()).isEqualTo(1);
    assertThat(info.lastActiveMs()).isEqualTo(10);
  }

  @Test
  void admitMutatesNothing() {
    apply(1, 1, 0);
    String before = table.digest();
    table.admit(ID, 0, 2, 2, 5);
    table.admit(ID, 0, 1, 1, 5);
    table.admit(ID, 0, 9, 1, 5);
    table.admit(ID, 3, 2, 1, 5);
    assertThat(table.digest()).isEqualTo(before);
  }

  @Test
  void unknownSessionIsExpired() {
    assertThat(table.admit(99, 0, 1, 1, 0)).isEqualTo(rejected(RejectCode.SESSION_EXPIRED));
  }

  @Test
  void olderEpochIsFencedAndNewerEpochIsInvalid() {
    table.register(8, 5, 6, "svc", TTL, 8, 0);
    assertThat(table.resume("svc", 5, 6, 31, 1)).isEqualTo(new Registration.Granted(8, 1, 1));
    assertThat(table.admit(8, 0, 1, 1, 1)).isEqualTo(rejected(RejectCode.FENCED));
    assertThat(table.admit(8, 1, 1, 1, 1)).isSameAs(Admission.NEW);
    assertThat(table.admit(8, 2, 1, 1, 1)).isEqualTo(rejected(RejectCode.INVALID_ARGUMENT));
  }

  @Test
  void duplicateReturnsTheSavedResponseWithoutReapplying() {
    apply(1, 1, 0);
    apply(2, 1, 0);
    Admission again = table.admit(ID, 0, 1, 1, 0);
    assertThat(again).isInstanceOf(Admission.Duplicate.class);
    assertThat(((Admission.Duplicate) again).response()).isEqualTo(resp(1));
    assertThat(((Admission.Duplicate) table.admit(ID, 0, 2, 1, 0)).response()).isEqualTo(resp(2));
    assertThat(table.nextSeq(ID)).isEqualTo(3);
  }

  @Test
  void ackTrimsSavedResponsesOnRecord() {
    apply(1, 1, 0);
    apply(2, 1, 0);
    apply(3, 3, 0);
    SessionInfo info = table.session(ID).orElseThrow();
    assertThat(info.lowWater()).isEqualTo(3);
    assertThat(info.savedResponses()).isEqualTo(1);
    assertThat(table.savedResponses()).isEqualTo(1);
  }

  @Test
  void acknowledgedDuplicateIsDiscarded() {
    apply(1, 1, 0);
    apply(2, 2, 0);
    assertThat(table.admit(ID, 0, 1, 1, 0)).isEqualTo(rejected(RejectCode.RESPONSE_DISCARDED));
  }

  @Test
  void duplicateCarryingAnAckAboveItsOwnNumberIsInvalid() {
    apply(1, 1, 0);
    assertThat(table.admit(ID, 0, 1, 2, 0)).isEqualTo(rejected(RejectCode.INVALID_ARGUMENT));
  }

  @Test
  void gapIsOutOfOrderAndNextSeqTellsWhereToResume() {
    apply(1, 1, 0);
    assertThat(table.admit(ID, 0, 3, 2, 0)).isEqualTo(rejected(RejectCode.OUT_OF_ORDER));
    assertThat(table.nextSeq(ID)).isEqualTo(2);
  }

  @Test
  void ackBeyondNextSeqIsClampedAndDropsNothingUnapplied() {
    apply(1, 1, 0);
    // Ack 5 claims responses 1..4; only 1 exists. The command is still a gap.
    assertThat(table.admit(ID, 0, 5, 5, 0)).isEqualTo(rejected(RejectCode.OUT_OF_ORDER));
    assertThat(table.keepAlive(ID, 0, 5, 0)).isEmpty();
    SessionInfo info = table.session(ID).orElseThrow();
    assertThat(info.lowWater()).isEqualTo(2).isEqualTo(info.nextSeq());
    apply(2, 2, 0);
    assertThat(table.session(ID).orElseThrow().savedResponses()).isEqualTo(1);
  }

  @Test
  void windowEdgeAdmitsExactlyWindowUnacknowledged() {
    for (long seq = 1; seq <= 4; seq++) {
      apply(seq, 1, 0);
    }
    assertThat(table.session(ID).orElseThrow().savedResponses()).isEqualTo(4);
    assertThat(table.admit(ID, 0, 5, 1, 0)).isEqualTo(rejected(RejectCode.WINDOW_EXCEEDED));
    // Acknowledging one response makes room for exactly one more.
    apply(5, 2, 0);
    assertThat(table.admit(ID, 0, 6, 2, 0)).isEqualTo(rejected(RejectCode.WINDOW_EXCEEDED));
  }

  @Test
  void malformedNumbersAreInvalid() {
    assertThat(table.admit(ID, 0, 0, 0, 0)).isEqualTo(rejected(RejectCode.INVALID_ARGUMENT));
    assertThat(table.admit(ID, 0, -3, 0, 0)).isEqualTo(rejected(RejectCode.INVALID_ARGUMENT));
    assertThat(table.admit(ID, 0, 1, -1, 0)).isEqualTo(rejected(RejectCode.INVALID_ARGUMENT));
  }

  @Test
  void sessionLivesAtExactlyTtlAndExpiresOneMillisecondLater() {
    apply(1, 1, 100);
    assertThat(table.admit(ID, 0, 2, 2, 100 + TTL)).isSameAs(Admission.NEW);
    assertThat(table.expire(100 + TTL)).isZero();
    assertThat(table.admit(ID, 0, 2, 2, 101 + TTL)).isEqualTo(rejected(RejectCode.SESSION_EXPIRED));
    assertThat(table.expire(101 + TTL)).isEqualTo(1);
    assertThat(table.session(ID)).isEmpty();
    assertThat(table.savedResponses()).isZero();
  }

  @Test
  void recordWithoutNewAdmissionIsACallerBug() {
    apply(1, 1, 0);
    assertThatThrownBy(() -> table.record(ID, 1, 1, 0, resp(1)))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> table.record(ID, 3, 1, 0, resp(3)))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> table.record(99, 1, 1, 0, resp(1)))
        .isInstanceOf(IllegalStateException.class);
    assertThatThrownBy(() -> table.record(ID, 2, 1, 0, null))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> table.record(ID, 2, 1, 0, new byte[SessionTable.MAX_RESPONSE_BYTES + 1]))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void recordBeyondTheWindowIsACallerBug() {
    for (long seq = 1; seq <= 4; seq++) {
      apply(seq, 1, 0);
    }
    assertThatThrownBy(() -> table.record(ID, 5, 1, 0, resp(5)))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("window");
  }
}
