package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Registration, resume by name, keep-alive, close, expiry and the session bound. */
class SessionLifecycleTest {
  private final SessionTable table =
      new SessionTable(SessionTableConfig.builder().maxSessions(3).maxNameLength(8).build());

  @Test
  void registerStartsAtEpochZeroAndSequenceOne() {
    assertThat(table.register(10, 1, 2, null, 500, 10, 0))
        .isEqualTo(new Registration.Granted(10, 0, 1));
    assertThat(table.authenticate(10, 1, 2)).isTrue();
    assertThat(table.authenticate(10, 1, 3)).isFalse();
    assertThat(table.authenticate(11, 1, 2)).isFalse();
  }

  @Test
  void tooManySessionsAtTheBound() {
    for (long id = 1; id <= 3; id++) {
      assertThat(table.register(id, 0, 0, null, 500, id, 0))
          .isInstanceOf(Registration.Granted.class);
    }
    assertThat(table.register(4, 0, 0, null, 500, 4, 0))
        .isEqualTo(new Registration.Refused(RejectCode.TOO_MANY_SESSIONS));
    assertThat(table.close(2, 0, 0)).isEmpty();
    assertThat(table.register(5, 0, 0, null, 500, 5, 0)).isInstanceOf(Registration.Granted.class);
  }

  @Test
  void registrationExpiresDueSessionsBeforeCountingThem() {
    for (long id = 1; id <= 3; id++) {
      table.register(id, 0, 0, null, 500, id, 0);
    }
    assertThat(table.register(4, 0, 0, null, 500, 4, 501)).isInstanceOf(Registration.Granted.class);
    assertThat(table.size()).isEqualTo(1);
  }

  @Test
  void badTtlOrNameIsInvalid() {
    SessionTableConfig c = table.config();
    assertThat(table.register(1, 0, 0, null, 0, 1, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.register(1, 0, 0, null, c.maxTtlMs() + 1, 1, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.register(1, 0, 0, null, c.maxTtlMs(), 1, 0))
        .isInstanceOf(Registration.Granted.class);
    assertThat(table.register(2, 0, 0, "", 500, 2, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.register(2, 0, 0, "123456789", 500, 2, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.register(2, 0, 0, "\uD800", 500, 2, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.register(2, 0, 0, "12345678", 500, 2, 0))
        .isInstanceOf(Registration.Granted.class);
  }

  @Test
  void reusedClientIdOrBadTimeIsACallerBug() {
    table.register(1, 0, 0, null, 500, 1, 0);
    assertThatThrownBy(() -> table.register(1, 0, 0, null, 500, 1, 0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("already in use");
    assertThatThrownBy(() -> table.expire(-1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void nameIsExclusiveWhileItsSessionLives() {
    table.register(1, 0, 0, "svc", 500, 1, 0);
    assertThat(table.register(2, 0, 0, "svc", 500, 2, 100))
        .isEqualTo(new Registration.Refused(RejectCode.NAME_IN_USE));
    assertThat(table.register(3, 0, 0, "svc", 500, 3, 501))
        .isInstanceOf(Registration.Granted.class);
    assertThat(table.clientIdOf("svc")).isEqualTo(3);
  }

  @Test
  void resumeBumpsEpochKeepsResponsesAndFencesTheOldInstance() {
    table.register(1, 11, 22, "svc", 500, 1, 0);
    assertThat(table.admit(1, 0, 1, 1, 0)).isSameAs(Admission.NEW);
    table.record(1, 1, 1, 0, new byte[] {42});

    Registration r = table.resume("svc", 11, 22, 31, 100);
    assertThat(r).isEqualTo(new Registration.Granted(1, 1, 2));
    assertThat(((Admission.Duplicate) table.admit(1, 1, 1, 1, 100)).response()).containsExactly(42);
    assertThat(table.admit(1, 0, 2, 1, 100)).isEqualTo(Admission.rejected(RejectCode.FENCED));
    assertThat(table.keepAlive(1, 0, 1, 100)).contains(RejectCode.FENCED);
    assertThat(table.close(1, 0, 100)).contains(RejectCode.FENCED);
    // Resume counted as activity.
    assertThat(table.admit(1, 1, 2, 1, 600)).isSameAs(Admission.NEW);
  }

  @Test
  void retriedNamedRegistrationGetsTheOriginalGrant() {
    assertThat(table.register(1, 11, 22, "svc", 500, 9, 0))
        .isEqualTo(new Registration.Granted(1, 0, 1));
    // The retry reached the log as a new entry with its own index and secret.
    assertThat(table.register(2, 33, 44, "svc", 500, 9, 10))
        .isEqualTo(new Registration.Granted(1, 0, 1));
    assertThat(table.register(3, 33, 44, "svc", 500, 8, 10))
        .isEqualTo(new Registration.Refused(RejectCode.NAME_IN_USE));
    assertThat(table.size()).isEqualTo(1);
  }

  @Test
  void retriedResumeDoesNotBumpTheEpochTwice() {
    table.register(1, 11, 22, "svc", 500, 9, 0);
    Registration first = table.resume("svc", 11, 22, 70, 10);
    assertThat(first).isEqualTo(new Registration.Granted(1, 1, 1));
    assertThat(table.resume("svc", 11, 22, 70, 20)).isEqualTo(first);
    assertThat(table.admit(1, 1, 1, 1, 20)).isSameAs(Admission.NEW);
    // Another instance (another nonce) takes over and fences the first.
    assertThat(table.resume("svc", 11, 22, 71, 30)).isEqualTo(new Registration.Granted(1, 2, 1));
    assertThat(table.admit(1, 1, 1, 1, 30)).isEqualTo(Admission.rejected(RejectCode.FENCED));
  }

  @Test
  void resumeRefusesWrongSecretUnknownNameAndExpiredSession() {
    table.register(1, 11, 22, "svc", 500, 1, 0);
    assertThat(table.resume("svc", 11, 23, 32, 0))
        .isEqualTo(new Registration.Refused(RejectCode.UNAUTHENTICATED));
    assertThat(table.resume("other", 11, 22, 33, 0))
        .isEqualTo(new Registration.Refused(RejectCode.SESSION_EXPIRED));
    assertThat(table.resume(null, 11, 22, 34, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.resume("svc", 11, 22, 35, 501))
        .isEqualTo(new Registration.Refused(RejectCode.SESSION_EXPIRED));
    assertThat(table.session(1)).isEmpty();
  }

  @Test
  void aSessionBoundToAPrincipalServesOnlyThatPrincipal() {
    table.register(1, 11, 22, "svc", 500, 1, "CN=tenant-a", 0);
    // Another tenant with the stolen secret can neither resume (and so fence) it nor use it.
    assertThat(table.resume("svc", 11, 22, 2, "CN=tenant-b", 10))
        .isEqualTo(new Registration.Refused(RejectCode.UNAUTHENTICATED));
    assertThat(table.resume("svc", 11, 22, 3, null, 10))
        .isEqualTo(new Registration.Refused(RejectCode.UNAUTHENTICATED));
    assertThat(table.session(1).orElseThrow().epoch()).isZero();
    assertThat(table.authenticate(1, 11, 22, "CN=tenant-b")).isFalse();
    assertThat(table.authenticate(1, 11, 22)).isFalse();
    assertThat(table.authenticate(1, 11, 22, "CN=tenant-a")).isTrue();
    // A retried registration with the same nonce is a retry only from the same principal.
    assertThat(table.register(2, 33, 44, "svc", 500, 1, "CN=tenant-b", 20))
        .isEqualTo(new Registration.Refused(RejectCode.NAME_IN_USE));
    assertThat(table.register(2, 33, 44, "svc", 500, 1, "CN=tenant-a", 20))
        .isEqualTo(new Registration.Granted(1, 0, 1));
    assertThat(table.resume("svc", 11, 22, 4, "CN=tenant-a", 30))
        .isEqualTo(new Registration.Granted(1, 1, 1));
    assertThat(table.principalOf(1)).contains("CN=tenant-a");
  }

  @Test
  void aSessionWithoutAPrincipalServesAnyCallerWithItsSecret() {
    table.register(1, 11, 22, null, 500, 1, "", 0);
    assertThat(table.principalOf(1)).isEmpty();
    assertThat(table.authenticate(1, 11, 22, "CN=anyone")).isTrue();
    assertThat(table.authenticate(1, 11, 22, null)).isTrue();
    assertThat(table.exists(1)).isTrue();
    table.close(1, 0, 10);
    assertThat(table.exists(1)).isFalse();
    assertThat(table.authenticate(1, 11, 22, null)).isFalse();
  }

  @Test
  void anOversizedPrincipalIsInvalid() {
    String huge = "CN=" + "x".repeat(SessionTable.MAX_PRINCIPAL_BYTES);
    assertThat(table.register(1, 11, 22, null, 500, 1, huge, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
  }

  @Test
  void keepAliveExtendsTheSession() {
    table.register(1, 0, 0, null, 500, 1, 0);
    assertThat(table.keepAlive(1, 0, 1, 400)).isEmpty();
    assertThat(table.expire(900)).isZero();
    assertThat(table.expire(901)).isEqualTo(1);
    assertThat(table.keepAlive(1, 0, 1, 901)).contains(RejectCode.SESSION_EXPIRED);
  }

  @Test
  void keepAliveRefusesDueSessionBeforeExpireRuns() {
    table.register(1, 0, 0, null, 500, 1, 0);
    assertThat(table.keepAlive(1, 0, 1, 501)).contains(RejectCode.SESSION_EXPIRED);
    assertThat(table.keepAlive(1, 0, -1, 10)).contains(RejectCode.INVALID_ARGUMENT);
    assertThat(table.keepAlive(1, 1, 1, 10)).contains(RejectCode.INVALID_ARGUMENT);
  }

  @Test
  void closeFreesSessionNameAndResponses() {
    table.register(1, 0, 0, "svc", 500, 1, 0);
    table.admit(1, 0, 1, 1, 0);
    table.record(1, 1, 1, 0, new byte[3]);
    assertThat(table.savedResponses()).isEqualTo(1);
    assertThat(table.close(1, 0, 10)).isEmpty();
    assertThat(table.savedResponses()).isZero();
    assertThat(table.clientIdOf("svc")).isEqualTo(-1);
    assertThat(table.close(1, 0, 10)).contains(RejectCode.SESSION_EXPIRED);
    assertThat(table.admit(1, 0, 2, 2, 10))
        .isEqualTo(Admission.rejected(RejectCode.SESSION_EXPIRED));
  }

  @Test
  void expireReportsIdsInAscendingOrderAndKeepsActiveSessions() {
    SessionTable big = new SessionTable(SessionTableConfig.defaults());
    for (long id = 100; id > 0; id--) {
      big.register(id, 0, 0, null, 1_000 + (id % 7), id, 0);
    }
    for (long id = 2; id <= 100; id += 2) {
      big.keepAlive(id, 0, 1, 500);
    }
    List<Long> expired = new ArrayList<>();
    assertThat(big.expire(1_100, expired::add)).isEqualTo(50);
    assertThat(expired).isSorted().allMatch(id -> id % 2 == 1);
    assertThat(big.size()).isEqualTo(50);
    assertThat(big.expire(1_600)).isEqualTo(50);
    assertThat(big.size()).isZero();
  }

  /** Lowering the bounds drops nothing: what exists lives on, what comes next is judged anew. */
  @Test
  void loweredBoundsKeepWhatExistsAndJudgeWhatComesNext() {
    table.register(1, 0, 0, "longname", 500, 1, 0);
    table.register(2, 0, 0, null, 500, 2, 0);
    for (long seq = 1; seq <= 4; seq++) {
      assertThat(table.admit(1, 0, seq, 1, 0)).isEqualTo(Admission.NEW);
      table.record(1, seq, 1, 0, new byte[] {(byte) seq});
    }
    table.reconfigure(
        SessionTableConfig.builder().window(2).maxSessions(1).maxNameLength(4).build());

    assertThat(table.size()).isEqualTo(2);
    assertThat(((Admission.Duplicate) table.admit(1, 0, 3, 1, 0)).response()).containsExactly(3);
    assertThat(table.admit(1, 0, 5, 1, 0))
        .isEqualTo(Admission.rejected(RejectCode.WINDOW_EXCEEDED));
    assertThat(table.admit(1, 0, 5, 4, 0)).isEqualTo(Admission.NEW);
    assertThat(table.register(3, 0, 0, null, 500, 3, 0))
        .isEqualTo(new Registration.Refused(RejectCode.TOO_MANY_SESSIONS));
    assertThat(table.register(3, 0, 0, "longer", 500, 3, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
    assertThat(table.resume("longname", 0, 0, 9, 0))
        .as("a held name stays resumable")
        .isEqualTo(new Registration.Granted(1, 1, 5));
    assertThat(table.resume("othernam", 0, 0, 9, 0))
        .isEqualTo(new Registration.Refused(RejectCode.INVALID_ARGUMENT));
  }

  @Test
  void eachPrincipalsSessionsAndSavedBytesAreCountedAndGivenBackWhenTheyEnd() throws Exception {
    table.register(1, 0, 0, null, 500, 1, "CN=a", 0);
    table.register(2, 0, 0, null, 500, 2, "CN=a", 0);
    table.register(3, 0, 0, null, 500, 3, null, 0);
    assertThat(table.usageOf("CN=a").sessions()).isEqualTo(2);
    assertThat(table.usageOf("").sessions()).isEqualTo(1);
    assertThat(table.admit(1, 0, 1, 0, 0)).isEqualTo(Admission.NEW);
    table.record(1, 1, 0, 0, new byte[100]);
    assertThat(table.admit(1, 0, 2, 0, 0)).isEqualTo(Admission.NEW);
    table.record(1, 2, 0, 0, new byte[50]);
    assertThat(table.usageOf("CN=a").savedBytes()).isEqualTo(150);
    assertThat(table.savedBytes()).isEqualTo(150);
    table.acknowledge(1, 2);
    assertThat(table.usageOf("CN=a").savedBytes()).isEqualTo(50);
    assertThat(table.savedBytes()).isEqualTo(50);
    // A snapshot restores the same usage, derived from the sessions.
    java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();
    table.writeSnapshot(out);
    SessionTable back =
        SessionTable.readSnapshot(new java.io.ByteArrayInputStream(out.toByteArray()));
    assertThat(back.usageOf("CN=a").savedBytes()).isEqualTo(50);
    assertThat(back.usageOf("CN=a").sessions()).isEqualTo(2);
    assertThat(table.close(1, 0, 0)).isEmpty();
    assertThat(table.usageOf("CN=a").sessions()).isEqualTo(1);
    assertThat(table.usageOf("CN=a").savedBytes()).isZero();
    assertThat(table.savedBytes()).isZero();
    table.expire(1_000);
    assertThat(table.usageOf("CN=a").sessions()).isZero();
    assertThat(table.usageOf("").sessions()).isZero();
  }
}
