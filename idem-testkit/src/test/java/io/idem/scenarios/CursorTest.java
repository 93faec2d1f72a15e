package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.client.CasMismatchException;
import io.idem.client.CursorClaim;
import io.idem.client.CursorCommit;
import io.idem.client.CursorStep;
import io.idem.client.IdemClient;
import io.idem.client.KeyAcquisition;
import io.idem.client.KeyValue;
import io.idem.client.Write;
import io.idem.client.WrongTypeException;
import io.idem.testkit.LocalCluster;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Cursors on a real three-node cluster: a claim fences earlier claimants in the log, a commit's
 * steps land with the cursor's advance, a resent commit applies nothing twice, and a step that
 * cannot apply stops the cursor after the steps before it.
 */
@Timeout(120)
class CursorTest {
  @TempDir static Path dir;
  static LocalCluster cluster;
  static String servers;

  @BeforeAll
  static void start() throws Exception {
    cluster = LocalCluster.start(3, dir);
    servers = String.join(",", cluster.clientAddresses());
  }

  @AfterAll
  static void stop() throws Exception {
    if (cluster != null) {
      cluster.close();
    }
  }

  private static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void aNewerClaimFencesTheOlderClaimantsCommit() {
    try (IdemClient a = IdemClient.builder().servers(servers).build();
        IdemClient b = IdemClient.builder().servers(servers).build()) {
      CursorClaim first = a.claimCursor("cur/fence");
      assertThat(first.epoch()).isEqualTo(1);
      assertThat(first.hasPosition()).isFalse();
      CursorCommit ok =
          a.commitCursor(
              "cur/fence",
              first.epoch(),
              List.of(new CursorStep(11, Write.increment("bal/fence", 5), null)));
      assertThat(ok).isEqualTo(new CursorCommit.Committed(11, ok.revision(), false));

      CursorClaim second = b.claimCursor("cur/fence");
      assertThat(second.epoch()).isEqualTo(2);
      assertThat(second.position()).isEqualTo(11);

      CursorCommit late =
          a.commitCursor(
              "cur/fence",
              first.epoch(),
              List.of(new CursorStep(12, Write.increment("bal/fence", 7), null)));
      assertThat(late).isInstanceOf(CursorCommit.Fenced.class);
      assertThat(((CursorCommit.Fenced) late).epoch()).isEqualTo(2);
      assertThat(late.position()).isEqualTo(11);
      assertThat(number(a, "bal/fence")).isEqualTo(5); // the late effect did not land
    }
  }

  @Test
  void stepsAtOrBelowThePositionAreSkippedSoAResendAppliesNothingTwice() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      long epoch = c.claimCursor("cur/resend").epoch();
      List<CursorStep> steps =
          List.of(
              new CursorStep(1, Write.increment("bal/resend", 1), null),
              new CursorStep(2, Write.increment("bal/resend", 10), null),
              new CursorStep(5, Write.increment("bal/resend", 100), null));
      assertThat(c.commitCursor("cur/resend", epoch, steps).position()).isEqualTo(5);
      // The same commit again, as after an unknown outcome, plus one new step.
      CursorCommit again =
          c.commitCursor(
              "cur/resend",
              epoch,
              List.of(
                  steps.get(1),
                  steps.get(2),
                  new CursorStep(6, Write.increment("bal/resend", 1000), null)));
      assertThat(again).isInstanceOf(CursorCommit.Committed.class);
      assertThat(again.position()).isEqualTo(6);
      assertThat(number(c, "bal/resend")).isEqualTo(1111);
    }
  }

  @Test
  void aRefusedStepStopsTheCursorAfterTheStepsBeforeIt() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      long epoch = c.claimCursor("cur/stop").epoch();
      CursorCommit r =
          c.commitCursor(
              "cur/stop",
              epoch,
              List.of(
                  new CursorStep(1, Write.put("acct/stop", b("a")), null),
                  new CursorStep(2, Write.compareAndSet("acct/stop", 99, b("b")), null),
                  new CursorStep(3, Write.put("acct/other", b("c")), null)));
      assertThat(r).isInstanceOf(CursorCommit.Stopped.class);
      CursorCommit.Stopped s = (CursorCommit.Stopped) r;
      assertThat(s.position()).isEqualTo(1);
      assertThat(s.stepsDone()).isEqualTo(1);
      assertThat(s.refusal()).isInstanceOf(CasMismatchException.class);
      assertThat(c.get("acct/stop").map(KeyValue::value))
          .hasValueSatisfying(v -> assertThat(v).isEqualTo(b("a")));
      assertThat(c.get("acct/other")).isEmpty(); // after the stop: not applied
      assertThat(c.claimCursor("cur/stop").position()).isEqualTo(1);
    }
  }

  @Test
  void aStepCompletesItsKeyWithItsEffectAndAStaleTokenStopsIt() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      long epoch = c.claimCursor("cur/keys").epoch();
      KeyAcquisition.Acquired k =
          (KeyAcquisition.Acquired)
              c.acquireKey("msg", "m-1", new byte[0], Duration.ofSeconds(30), Duration.ofHours(1));
      CursorCommit ok =
          c.commitCursor(
              "cur/keys",
              epoch,
              List.of(
                  new CursorStep(
                      8,
                      Write.increment("bal/keys", 3),
                      new CursorStep.Completion("msg", "m-1", k.token(), b("done")))));
      assertThat(ok).isInstanceOf(CursorCommit.Committed.class);
      KeyAcquisition again =
          c.acquireKey("msg", "m-1", new byte[0], Duration.ofSeconds(30), Duration.ofHours(1));
      assertThat(again).isInstanceOf(KeyAcquisition.Completed.class);

      // A step whose token no longer owns its key: nothing of it lands.
      CursorCommit stale =
          c.commitCursor(
              "cur/keys",
              epoch,
              List.of(
                  new CursorStep(
                      9,
                      Write.increment("bal/keys", 1000),
                      new CursorStep.Completion("msg", "m-1", k.token(), b("again")))));
      assertThat(stale).isInstanceOf(CursorCommit.Stopped.class);
      assertThat(((CursorCommit.Stopped) stale).refusal()).isNull();
      assertThat(stale.position()).isEqualTo(8);
      assertThat(number(c, "bal/keys")).isEqualTo(3);
    }
    cluster.awaitEqualDigests(Duration.ofSeconds(20));
  }

  @Test
  void aKeyHoldingAnotherValueIsNotACursorAndACommitWithoutAClaimIsFenced() {
    try (IdemClient c = IdemClient.builder().servers(servers).build()) {
      c.put("cur/plain", b("hello"));
      assertThatThrownBy(() -> c.claimCursor("cur/plain")).isInstanceOf(WrongTypeException.class);
      CursorCommit r = c.commitCursor("cur/never", 1, List.of(CursorStep.advance(3)));
      assertThat(r).isEqualTo(new CursorCommit.Fenced(0, -1, r.revision(), false));
      assertThat(c.get("cur/never")).isEmpty();
    }
  }

  private static long number(IdemClient c, String key) {
    Optional<KeyValue> v = c.get(key);
    return v.map(kv -> Long.parseLong(new String(kv.value(), StandardCharsets.UTF_8))).orElse(0L);
  }
}
