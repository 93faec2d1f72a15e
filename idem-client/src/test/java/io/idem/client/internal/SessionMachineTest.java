package io.idem.client.internal;

import static io.idem.client.internal.MachineHarness.MS;
import static io.idem.client.internal.MachineHarness.PROBE;
import static io.idem.client.internal.MachineHarness.STALL;
import static io.idem.client.internal.MachineHarness.all;
import static io.idem.client.internal.MachineHarness.answer;
import static io.idem.client.internal.MachineHarness.append;
import static io.idem.client.internal.MachineHarness.frames;
import static io.idem.client.internal.MachineHarness.granted;
import static io.idem.client.internal.MachineHarness.only;
import static io.idem.client.internal.MachineHarness.sentSeqs;
import static io.idem.client.internal.MachineHarness.sessionFrame;
import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.idem.client.ClientClosedException;
import io.idem.client.FencedException;
import io.idem.client.IdentityFileException;
import io.idem.client.InvalidArgumentException;
import io.idem.client.NotSentException;
import io.idem.client.OutcomeUnknownException;
import io.idem.client.SessionExpiredException;
import io.idem.client.UnauthenticatedException;
import io.idem.client.internal.SessionMachine.State;
import io.idem.proto.Code;
import io.idem.proto.Limits;
import io.idem.proto.Operation;
import io.idem.proto.Put;
import io.idem.proto.RegisterReply;
import io.idem.proto.ServerFrame;
import java.io.IOException;
import java.util.List;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;

/**
 * Every state of {@link SessionMachine} against every event, with a clock that moves only when
 * told: no network, no threads, milliseconds to run.
 */
class SessionMachineTest {

  static Throwable failure(SessionMachine.Call c) {
    assertThat(c.future()).isCompletedExceptionally();
    try {
      c.future().join();
      throw new AssertionError("not failed");
    } catch (CompletionException e) {
      return e.getCause();
    }
  }

  static <T> T failure(SessionMachine.Call c, Class<T> type) {
    Throwable t = failure(c);
    assertThat(t).isInstanceOf(type);
    return type.cast(t);
  }

  @Nested
  class Idle {
    final MachineHarness h = MachineHarness.anonymous(4);

    @Test
    void startsIdleAndATickWithNothingToDoEmitsNothing() {
      h.m.start(h.now);
      h.advance(10 * STALL);
      assertThat(h.m.state()).isEqualTo(State.IDLE);
      assertThat(h.effects()).isEmpty();
    }

    @Test
    void aCallStartsARegistrationAtTheFirstServer() {
      h.submit("v1");
      Effect.Register r = only(h.effects(), Effect.Register.class);
      assertThat(h.m.state()).isEqualTo(State.REGISTERING);
      assertThat(r.address()).isEqualTo("a:1");
      assertThat(r.request().getResume()).isFalse();
      assertThat(r.request().getNonce()).isEqualTo(r.nonce()).isNotZero();
      assertThat(r.request().getTtlMs()).isEqualTo(60_000);
    }

    @Test
    void framesStreamEndsAndRepliesAreIgnored() {
      h.m.frame(1, answer(1, Code.OK, 1, false), h.now);
      h.m.streamEnded(1, h.now);
      h.m.registerReplied(100, granted(9, 1, 8, null), h.now);
      h.m.registerFailed(100, h.now);
      assertThat(h.effects()).isEmpty();
      assertThat(h.m.state()).isEqualTo(State.IDLE);
    }

    @Test
    void closeStopsWithoutTouchingTheNetwork() {
      h.m.close(h.now);
      assertThat(h.effects()).containsExactly(new Effect.Stop());
      assertThat(h.m.state()).isEqualTo(State.CLOSED);
    }
  }

  @Nested
  class Registering {
    final MachineHarness h = MachineHarness.anonymous(2);

    @Test
    void aGrantOpensAStreamWithHelloThenSendsWhatTheWindowAllows() {
      SessionMachine.Call c1 = h.submit("v1");
      h.submit("v2");
      h.submit("v3");
      List<Effect> e = h.register(42);
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
      Effect.OpenStream o = (Effect.OpenStream) e.get(0);
      assertThat(o.hello().getClientId()).isEqualTo(42);
      assertThat(o.hello().getSecretHi()).isEqualTo(7);
      assertThat(o.address()).isEqualTo("a:1");
      assertThat(sentSeqs(e)).containsExactly(1L, 2L); // window 2
      assertThat(frames(e).get(0).getRequest().getAck()).isEqualTo(1);
      assertThat(frames(e).get(1).getRequest().getAck()).isEqualTo(1);
      assertThat(c1.seq()).isEqualTo(1);
      assertThat(h.m.clientId()).isEqualTo(42);
    }

    @Test
    void theServersWindowBoundsTheClientsWhenSmaller() {
      MachineHarness big = MachineHarness.anonymous(64);
      for (int i = 0; i < 10; i++) {
        big.submit("v" + i);
      }
      long n = big.registerNonce(big.effects());
      big.m.registerReplied(n, granted(1, 1, 3, null), big.now);
      assertThat(sentSeqs(big.effects())).containsExactly(1L, 2L, 3L);
      assertThat(big.m.window()).isEqualTo(3);
    }

    @Test
    void aLateReplyOfAnotherAttemptIsIgnored() {
      h.submit("v1");
      long n = h.registerNonce(h.effects());
      h.m.registerReplied(n + 1, granted(1, 1, 8, null), h.now);
      assertThat(h.effects()).isEmpty();
      assertThat(h.m.state()).isEqualTo(State.REGISTERING);
    }

    @Test
    void notLeaderMovesToTheHintAfterABackoffWithTheSameNonce() {
      h.submit("v1");
      long n = h.registerNonce(h.effects());
      h.m.registerReplied(
          n,
          RegisterReply.newBuilder().setCode(Code.NOT_LEADER).setLeaderHint("c:3").build(),
          h.now);
      assertThat(h.m.state()).isEqualTo(State.REGISTER_BACKOFF);
      assertThat(h.effects()).isEmpty();
      h.advance(SessionMachine.MIN_BACKOFF_NANOS - 1);
      assertThat(h.effects()).isEmpty();
      h.advance(1);
      Effect.Register again = only(h.effects(), Effect.Register.class);
      assertThat(again.address()).isEqualTo("c:3");
      assertThat(again.nonce()).isEqualTo(n); // a retry of the same attempt: never a 2nd session
      assertThat(h.m.retries()).isEqualTo(1);
    }

    @Test
    void failedRpcsTryTheNextServersWithBackoffThatDoublesUpToItsCap() {
      h.submit("v1");
      long n = h.registerNonce(h.effects());
      long expected = SessionMachine.MIN_BACKOFF_NANOS;
      String[] order = {"b:2", "c:3", "a:1", "b:2", "c:3", "a:1", "b:2"};
      for (String next : order) {
        h.m.registerFailed(n, h.now);
        h.advance(expected - 1);
        assertThat(h.effects()).isEmpty();
        h.advance(1);
        assertThat(only(h.effects(), Effect.Register.class).address()).isEqualTo(next);
        expected = Math.min(SessionMachine.MAX_BACKOFF_NANOS, expected * 2);
      }
      assertThat(expected).isEqualTo(SessionMachine.MAX_BACKOFF_NANOS);
    }

    @Test
    void overloadedTooManySessionsAndNameInUseAreRetried() {
      for (Code code : List.of(Code.OVERLOADED, Code.TOO_MANY_SESSIONS, Code.NAME_IN_USE)) {
        MachineHarness x = MachineHarness.anonymous(2);
        x.submit("v");
        long n = x.registerNonce(x.effects());
        x.m.registerReplied(n, RegisterReply.newBuilder().setCode(code).build(), x.now);
        assertThat(x.m.state()).as(code.name()).isEqualTo(State.REGISTER_BACKOFF);
      }
    }

    @Test
    void aRefusedSecretClosesTheClient() {
      SessionMachine.Call c = h.submit("v1");
      long n = h.registerNonce(h.effects());
      h.m.registerReplied(
          n, RegisterReply.newBuilder().setCode(Code.UNAUTHENTICATED).build(), h.now);
      assertThat(h.effects()).last().isEqualTo(new Effect.Stop());
      assertThat(h.m.state()).isEqualTo(State.CLOSED);
      NotSentException e = failure(c, NotSentException.class);
      assertThat(e.getCause()).isInstanceOf(UnauthenticatedException.class);
    }

    @Test
    void aRegistrationRefusedAsInvalidClosesTheClientWithTheReason() {
      SessionMachine.Call c = h.submit("v1");
      long n = h.registerNonce(h.effects());
      h.m.registerReplied(
          n,
          RegisterReply.newBuilder()
              .setCode(Code.INVALID_ARGUMENT)
              .setMessage("ttl too long")
              .build(),
          h.now);
      h.effects();
      Throwable cause = failure(c, NotSentException.class).getCause();
      assertThat(cause).isInstanceOf(ClientClosedException.class).hasMessageContaining("ttl");
      assertThat(cause.getCause()).isInstanceOf(InvalidArgumentException.class);
    }

    @Test
    void aDeadlineThatPassesBeforeASessionFailsTheCallAsNotSent() {
      SessionMachine.Call c = h.submit(append("v1"), 100 * MS);
      h.effects();
      h.advance(101 * MS);
      h.effects();
      NotSentException e = failure(c, NotSentException.class);
      assertThat(e.reason()).isEqualTo(NotSentException.Reason.DEADLINE);
      assertThat(e.requestNumber()).isZero();
    }

    @Test
    void aCallThatNeverGotASessionSaysWhyTheLastAttemptFailed() {
      SessionMachine.Call c = h.submit(append("v1"), 100 * MS);
      long n = h.registerNonce(h.effects());
      h.m.registerFailed(
          n, "a:1: UNAVAILABLE: io exception (Received fatal alert: certificate_required)", h.now);
      h.advance(101 * MS);
      h.effects();
      NotSentException e = failure(c, NotSentException.class);
      assertThat(e.reason()).isEqualTo(NotSentException.Reason.DEADLINE);
      assertThat(e)
          .hasMessageContaining(
              "(last attempt: a:1: UNAVAILABLE: io exception (Received fatal alert: certificate_required))");
    }

    @Test
    void closeFailsWaitingCallsAsNotSent() {
      SessionMachine.Call c = h.submit("v1");
      h.effects();
      h.m.close(h.now);
      assertThat(h.effects()).last().isEqualTo(new Effect.Stop());
      assertThat(failure(c, NotSentException.class).reason())
          .isEqualTo(NotSentException.Reason.CLIENT_CLOSED);
    }
  }

  @Nested
  class Connected {
    final MachineHarness h = MachineHarness.anonymous(3);
    SessionMachine.Call c1;
    SessionMachine.Call c2;

    void connect() {
      c1 = h.submit("v1");
      c2 = h.submit("v2");
      h.register(42);
    }

    @Test
    void anAnswerCompletesItsCallAndLetsTheNextOneIn() {
      connect();
      h.submit("v3");
      SessionMachine.Call c4 = h.submit("v4");
      assertThat(sentSeqs(h.effects())).containsExactly(3L); // window 3: seqs 1..3 in flight
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      List<Effect> e = h.effects();
      assertThat(c1.future()).isCompleted();
      assertThat(c1.future().join().getResult().getNumber()).isEqualTo(1);
      assertThat(sentSeqs(e)).containsExactly(4L);
      assertThat(frames(e).get(0).getRequest().getAck()).isEqualTo(2); // 1 is answered
      assertThat(c4.seq()).isEqualTo(4);
    }

    @Test
    void theHelloSaysTheClientTakesAnswersInBatches() {
      c1 = h.submit("v1");
      List<Effect> e = h.register(42);
      assertThat(only(e, Effect.OpenStream.class).hello().getBatches()).isTrue();
    }

    @Test
    void aBatchOfAnswersIsTakenAsIfEachHadComeAlone() {
      connect();
      h.submit("v3");
      SessionMachine.Call c4 = h.submit("v4");
      h.effects();
      h.m.frame(
          h.stream(),
          ServerFrame.newBuilder()
              .addBatch(answer(2, Code.OK, 2, false))
              .addBatch(answer(1, Code.OK, 1, true))
              .build(),
          h.now);
      List<Effect> e = h.effects();
      assertThat(c1.future()).isCompleted();
      assertThat(c2.future()).isCompleted();
      assertThat(c1.future().join().getResult().getNumber()).isEqualTo(1);
      assertThat(c2.future().join().getResult().getNumber()).isEqualTo(2);
      assertThat(h.m.duplicates()).isEqualTo(1);
      assertThat(sentSeqs(e)).containsExactly(4L); // 1 and 2 answered: 4 fits the window of 3
      assertThat(c4.seq()).isEqualTo(4);
    }

    @Test
    void aBatchInsideABatchBreaksTheStreamAfterTheAnswersBeforeIt() {
      connect();
      int old = h.stream();
      h.m.frame(
          old,
          ServerFrame.newBuilder()
              .addBatch(answer(2, Code.OK, 2, false))
              .addBatch(ServerFrame.newBuilder().addBatch(answer(1, Code.OK, 1, false)))
              .build(),
          h.now);
      List<Effect> e = h.effects();
      assertThat(e).contains(new Effect.EndStream(old, true));
      assertThat(c2.future()).isCompleted();
      assertThat(c1.future()).as("nested: not taken, resent on the next stream").isNotDone();
      assertThat(h.m.state()).isEqualTo(State.RECONNECT_BACKOFF);
    }

    @Test
    void requestsGoTogetherOnlyOnAStreamWhoseServerSaidItTakesThem() {
      c1 = h.submit("v1");
      List<Effect> e = h.register(42);
      assertThat(only(e, Effect.OpenStream.class).hello().getRequestBatches()).isTrue();
      assertThat(all(e, Effect.Send.class)).singleElement().matches(s -> !s.batchable());
      assertThat(h.m.takesRequestBatches()).isFalse();

      h.m.frame(h.stream(), takesRequestBatches(), h.now);
      assertThat(h.m.takesRequestBatches()).isTrue();
      assertThat(h.effects()).as("the server's word changes nothing else").isEmpty();
      h.submit("v2");
      assertThat(all(h.effects(), Effect.Send.class))
          .singleElement()
          .matches(Effect.Send::batchable);

      // A new stream (to another server, perhaps an older one) must be told again.
      h.m.streamEnded(h.stream(), h.now);
      assertThat(h.m.takesRequestBatches()).isFalse();
      h.advance(SessionMachine.MAX_BACKOFF_NANOS);
      List<Effect> resent = h.effects();
      assertThat(sentSeqs(resent)).containsExactly(1L, 2L);
      assertThat(all(resent, Effect.Send.class)).noneMatch(Effect.Send::batchable);
      h.m.frame(h.stream(), takesRequestBatches(), h.now);
      h.submit("v3");
      assertThat(all(h.effects(), Effect.Send.class)).allMatch(Effect.Send::batchable);
    }

    private ServerFrame takesRequestBatches() {
      return sessionFrame(Code.OK, "").toBuilder().setTakesRequestBatches(true).build();
    }

    @Test
    void theWindowBoundsTheSpanFromTheLowestUnansweredNotTheCount() {
      connect();
      h.submit("v3");
      h.submit("v4");
      h.effects();
      // 2 answered out of order: 1 is still unanswered, so 4 cannot go (4 - 1 >= 3).
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      assertThat(sentSeqs(h.effects())).isEmpty();
      assertThat(c2.future()).isCompleted();
    }

    @Test
    void aSavedAnswerIsCountedAsASuppressedDuplicate() {
      connect();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, true), h.now);
      h.effects();
      assertThat(h.m.duplicates()).isEqualTo(1);
      assertThat(c1.future().join().getDuplicate()).isTrue();
    }

    @Test
    void aFrameOfAnOldStreamIsIgnored() {
      connect();
      h.m.frame(h.stream() - 1, answer(1, Code.OK, 1, false), h.now);
      assertThat(h.effects()).isEmpty();
      assertThat(c1.future()).isNotDone();
    }

    @Test
    void notLeaderReconnectsToTheHintAndResendsEverythingWithTheSameNumbers() {
      connect();
      int old = h.stream();
      h.m.frame(old, sessionFrame(Code.NOT_LEADER, "c:3"), h.now);
      assertThat(h.effects()).containsExactly(new Effect.EndStream(old, true));
      assertThat(h.m.state()).isEqualTo(State.RECONNECT_BACKOFF);
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      List<Effect> e = h.effects();
      Effect.OpenStream o = (Effect.OpenStream) e.get(0);
      assertThat(o.address()).isEqualTo("c:3");
      assertThat(o.stream()).isGreaterThan(old);
      assertThat(sentSeqs(e)).containsExactly(1L, 2L);
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
    }

    @Test
    void aRequestAnsweredNotLeaderOrOverloadedReconnectsToo() {
      for (Code code : List.of(Code.NOT_LEADER, Code.OVERLOADED)) {
        MachineHarness x = MachineHarness.anonymous(3);
        x.submit("v1");
        x.register(1);
        x.m.frame(x.stream(), answer(1, code, 0, false), x.now);
        assertThat(x.m.state()).as(code.name()).isEqualTo(State.RECONNECT_BACKOFF);
      }
    }

    @Test
    void aStreamThatEndsIsReopenedAfterABackoffAndABackoffResetsOnAnyFrame() {
      connect();
      h.m.streamEnded(h.stream(), h.now);
      h.effects();
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      h.effects();
      h.m.streamEnded(h.stream(), h.now);
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      assertThat(all(h.effects(), Effect.OpenStream.class)).isEmpty(); // backoff doubled
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      assertThat(all(h.effects(), Effect.OpenStream.class)).hasSize(1);
      h.m.frame(h.stream(), sessionFrame(Code.OK, ""), h.now);
      h.m.streamEnded(h.stream(), h.now);
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      assertThat(all(h.effects(), Effect.OpenStream.class)).hasSize(1);
    }

    @Test
    void outOfOrderResendsFromTheServersNextNumberAtMostOncePerSecondForOneGap() {
      connect();
      h.submit("v3");
      h.effects();
      h.m.frame(
          h.stream(),
          answer(3, Code.OUT_OF_ORDER, 0, false).toBuilder().setNextSeq(2).build(),
          h.now);
      assertThat(sentSeqs(h.effects())).containsExactly(2L, 3L);
      h.m.frame(
          h.stream(),
          answer(3, Code.OUT_OF_ORDER, 0, false).toBuilder().setNextSeq(2).build(),
          h.now);
      assertThat(sentSeqs(h.effects())).isEmpty();
      // A second later (the stream alive meanwhile), the same gap is resent again.
      for (int i = 0; i < 3; i++) {
        h.advance(SessionMachine.RESEND_GAP_NANOS / 2);
        h.m.frame(h.stream(), sessionFrame(Code.OK, ""), h.now);
      }
      h.effects();
      h.m.frame(
          h.stream(),
          answer(3, Code.OUT_OF_ORDER, 0, false).toBuilder().setNextSeq(2).build(),
          h.now);
      assertThat(sentSeqs(h.effects())).containsExactly(2L, 3L);
    }

    @Test
    void sessionExpiredFailsCallsInFlightAndRegistersAnewForWaitingOnes() {
      connect();
      h.submit("v3");
      SessionMachine.Call c4 = h.submit("v4");
      h.effects();
      h.m.frame(h.stream(), sessionFrame(Code.SESSION_EXPIRED, ""), h.now);
      List<Effect> e = h.effects();
      SessionExpiredException x = failure(c1, SessionExpiredException.class);
      assertThat(x.isFatal()).isFalse();
      assertThat(x.requestNumber()).isEqualTo(1);
      assertThat(x.sessionId()).isEqualTo(42);
      assertThat(only(e, Effect.Register.class).request().getResume()).isFalse();
      assertThat(h.m.state()).isEqualTo(State.REGISTERING);
      assertThat(c4.future()).isNotDone();
      long n = h.registerNonce(e);
      h.m.registerReplied(n, granted(43, 1, 8, null), h.now);
      assertThat(sentSeqs(h.effects())).containsExactly(1L); // numbering starts again
      assertThat(c4.seq()).isEqualTo(1);
    }

    @Test
    void fencedClosesTheClientCallsInFlightLostAndWaitingOnesNotSent() {
      connect();
      h.submit("v3");
      SessionMachine.Call c4 = h.submit("v4");
      h.effects();
      h.m.frame(h.stream(), answer(2, Code.FENCED, 0, false), h.now);
      assertThat(h.effects()).last().isEqualTo(new Effect.Stop());
      FencedException f = failure(c1, FencedException.class);
      assertThat(f.isFatal()).isTrue();
      assertThat(f.requestNumber()).isEqualTo(1);
      assertThat(failure(c4, NotSentException.class).getCause())
          .isInstanceOf(FencedException.class);
      SessionMachine.Call later = h.submit("v5");
      h.effects();
      assertThat(failure(later, NotSentException.class).getCause())
          .isInstanceOf(FencedException.class);
    }

    @Test
    void aStreamThatStaysSilentWithCallsInFlightIsReplacedWithItsConnection() {
      connect();
      int old = h.stream();
      h.advance(STALL);
      // The other servers were asked who leads; they did not answer.
      assertThat(h.effects()).containsExactly(new Effect.Probe(1, List.of("b:2", "c:3")));
      h.advance(1);
      List<Effect> e = h.effects();
      assertThat(e)
          .containsExactly(new Effect.ReplaceConnection("a:1"), new Effect.EndStream(old, true));
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      e = h.effects();
      assertThat(only(e, Effect.OpenStream.class).address()).isEqualTo("b:2");
      assertThat(sentSeqs(e)).containsExactly(1L, 2L);
    }

    @Test
    void answersThatFlowSlowlyAreNotAStall() {
      connect();
      h.submit("v3");
      h.effects();
      for (long seq = 1; seq <= 3; seq++) {
        h.advance(STALL - MS);
        h.m.frame(h.stream(), answer(seq, Code.OK, seq, false), h.now);
        h.submit("v" + (seq + 3));
      }
      assertThat(all(h.effects(), Effect.ReplaceConnection.class)).isEmpty();
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
    }

    @Test
    void anIdleSessionKeepsAliveWithItsAckAndAnUnansweredKeepAliveIsAStall() {
      connect();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      h.effects();
      h.advance(MachineHarness.KEEPALIVE);
      List<io.idem.proto.ClientFrame> f = frames(h.effects());
      assertThat(f).hasSize(1);
      assertThat(f.get(0).getKeepAlive().getAck()).isEqualTo(3);
      h.advance(STALL + 1);
      assertThat(only(h.effects(), Effect.ReplaceConnection.class).address()).isEqualTo("a:1");
    }

    @Test
    void anAnsweredKeepAliveIsNoStall() {
      connect();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      h.advance(MachineHarness.KEEPALIVE);
      h.m.frame(h.stream(), sessionFrame(Code.OK, ""), h.now);
      h.advance(STALL + 1);
      assertThat(all(h.effects(), Effect.ReplaceConnection.class)).isEmpty();
    }

    @Test
    void aSentCallPastItsDeadlineFailsAsOutcomeUnknownButIsStillResent() {
      c1 = h.submit(append("v1"), 100 * MS);
      h.register(42);
      h.m.frame(h.stream(), sessionFrame(Code.OK, ""), h.now); // keep the stream alive
      h.advance(101 * MS);
      h.effects();
      OutcomeUnknownException x = failure(c1, OutcomeUnknownException.class);
      assertThat(x.requestNumber()).isEqualTo(1);
      h.m.frame(h.stream(), sessionFrame(Code.NOT_LEADER, ""), h.now);
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      assertThat(sentSeqs(h.effects())).containsExactly(1L);
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      assertThat(all(h.effects(), Effect.Complete.class)).isEmpty(); // completed once, as failed
    }

    @Test
    void aCallOverTheClustersLimitsIsRefusedWithoutUsingANumber() {
      SessionMachine.Call big =
          h.submit(
              Operation.newBuilder()
                  .setPut(Put.newBuilder().setKey("k").setValue(ByteString.copyFrom(new byte[11])))
                  .build(),
              60_000 * MS);
      SessionMachine.Call ok = h.submit("v");
      long n = h.registerNonce(h.effects());
      Limits limits =
          Limits.newBuilder()
              .setMaxKeyBytes(8)
              .setMaxValueBytes(10)
              .setMaxNameChars(4)
              .setMaxLeaseTtlMs(1000)
              .build();
      h.m.registerReplied(n, granted(1, 1, 8, limits), h.now);
      assertThat(sentSeqs(h.effects())).containsExactly(1L);
      assertThat(failure(big, InvalidArgumentException.class))
          .hasMessageContaining("value is 11 bytes, the limit is 10");
      assertThat(ok.seq()).isEqualTo(1);
      assertThat(h.m.limits()).isEqualTo(limits);
    }

    @Test
    void closingAnIdleAnonymousSessionClosesItOnTheServerToo() {
      connect();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      h.effects();
      h.m.close(h.now);
      List<Effect> e = h.effects();
      assertThat(frames(e)).hasSize(1);
      assertThat(frames(e).get(0).hasClose()).isTrue();
      assertThat(e.subList(1, 3))
          .containsExactly(new Effect.EndStream(h.stream(), false), new Effect.Stop());
    }

    @Test
    void closingWithCallsInFlightFailsThemAsClosedAndKeepsTheSession() {
      connect();
      h.m.close(h.now);
      List<Effect> e = h.effects();
      assertThat(frames(e)).isEmpty();
      ClientClosedException x = failure(c1, ClientClosedException.class);
      assertThat(x.requestNumber()).isEqualTo(1);
      assertThat(x.isFatal()).isTrue();
    }

    @Test
    void aGracefulCloseRefusesNewCallsWhileOldOnesFinish() {
      connect();
      h.m.stopAccepting();
      SessionMachine.Call late = h.submit("late");
      h.effects();
      assertThat(failure(late, NotSentException.class).reason())
          .isEqualTo(NotSentException.Reason.CLIENT_CLOSED);
      assertThat(h.m.quiet()).isFalse();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      assertThat(h.m.quiet()).isTrue();
    }
  }

  @Nested
  class ReconnectBackoff {
    final MachineHarness h = MachineHarness.anonymous(4);

    @Test
    void framesAreIgnoredAndNewCallsWaitForTheNextStream() {
      h.submit("v1");
      h.register(1);
      int old = h.stream();
      h.m.streamEnded(old, h.now);
      h.effects();
      h.m.frame(old, answer(1, Code.OK, 1, false), h.now);
      SessionMachine.Call c2 = h.submit("v2");
      assertThat(h.effects()).isEmpty();
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      assertThat(sentSeqs(h.effects())).containsExactly(1L, 2L);
      assertThat(c2.seq()).isEqualTo(2);
    }

    @Test
    void closeStopsWithoutEndingAStreamThatIsGone() {
      h.submit("v1");
      h.register(1);
      h.m.streamEnded(h.stream(), h.now);
      h.effects();
      h.m.close(h.now);
      List<Effect> e = h.effects();
      assertThat(all(e, Effect.EndStream.class)).isEmpty();
      assertThat(all(e, Effect.Fail.class)).hasSize(1);
      assertThat(e).last().isEqualTo(new Effect.Stop());
    }
  }

  @Nested
  class Closed {
    @Test
    void everyEventAfterCloseIsIgnored() {
      MachineHarness h = MachineHarness.anonymous(4);
      h.submit("v1");
      long n = h.registerNonce(h.effects());
      h.m.close(h.now);
      h.effects();
      h.m.registerReplied(n, granted(1, 1, 8, null), h.now);
      h.m.registerFailed(n, h.now);
      h.m.frame(1, answer(1, Code.OK, 1, false), h.now);
      h.m.streamEnded(1, h.now);
      h.advance(10 * STALL);
      h.m.close(h.now);
      h.m.transportClosed();
      assertThat(h.effects()).isEmpty();
      assertThat(h.m.state()).isEqualTo(State.CLOSED);
    }

    @Test
    void aClosedTransportClosesTheClientWithAClearReason() {
      MachineHarness h = MachineHarness.anonymous(4);
      SessionMachine.Call c = h.submit("v1");
      h.register(1);
      h.m.transportClosed();
      h.effects();
      assertThat(failure(c, ClientClosedException.class)).hasMessageContaining("transport");
    }
  }

  @Nested
  class Durable {
    @Test
    void aPendingRegistrationIsJournaledBeforeItsRegisterAndTheGrantAfter() {
      MachineHarness h = MachineHarness.durable(4, SessionMachine.Recovery.NONE);
      h.submit("v1");
      List<Effect> e = h.effects();
      Effect.JournalPending p = (Effect.JournalPending) e.get(0);
      assertThat(e.get(1)).isInstanceOf(Effect.Register.class);
      assertThat(p.nonce()).isEqualTo(((Effect.Register) e.get(1)).nonce());
      assertThat(((Effect.Register) e.get(1)).request().getName()).isEqualTo("me");
      h.m.registerReplied(p.nonce(), granted(9, 1, 8, null), h.now);
      e = h.effects();
      assertThat(e.get(0)).isEqualTo(new Effect.JournalIdentity("me", 9, 7, 8, 60_000));
      // The request is durable before it leaves.
      int journaled = e.indexOf(only(e, Effect.JournalSent.class));
      int sent = e.indexOf(all(e, Effect.Send.class).get(0));
      assertThat(journaled).isLessThan(sent);
      assertThat(only(e, Effect.JournalSent.class).requests()).containsOnlyKeys(1L);
    }

    @Test
    void answeredNumbersAreDurableBeforeAnyAckThatDependsOnThemLeaves() {
      MachineHarness h = MachineHarness.durable(4, SessionMachine.Recovery.NONE);
      h.submit("v1");
      h.submit("v2");
      h.register(9);
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      List<Effect> answered = h.effects();
      assertThat(answered.get(0)).isEqualTo(new Effect.JournalDone(1));
      assertThat(answered.get(1)).isInstanceOf(Effect.Complete.class);
      assertThat(answered).hasSize(2);
      // A resend after a reconnect carries ack 2: the journal is synced first.
      h.m.streamEnded(h.stream(), h.now);
      h.advance(SessionMachine.MIN_BACKOFF_NANOS);
      List<Effect> e = h.effects();
      int sync = e.indexOf(new Effect.JournalSync());
      assertThat(sync).isPositive();
      assertThat(e.indexOf(all(e, Effect.Send.class).get(0))).isGreaterThan(sync);
      assertThat(frames(e).get(0).getRequest().getAck()).isEqualTo(2);
      // An answer, then a keep-alive whose ack passes it: synced first.
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      h.advance(MachineHarness.KEEPALIVE);
      e = h.effects();
      int done = e.indexOf(new Effect.JournalDone(2));
      sync = e.indexOf(new Effect.JournalSync());
      assertThat(done).isNotNegative().isLessThan(sync);
      assertThat(e.indexOf(only(e, Effect.Send.class))).isGreaterThan(sync);
      assertThat(frames(e).get(0).getKeepAlive().getAck()).isEqualTo(3);
      // Nothing answered since: the next keep-alive needs no sync.
      h.m.frame(h.stream(), sessionFrame(Code.OK, ""), h.now);
      h.advance(MachineHarness.KEEPALIVE);
      e = h.effects();
      assertThat(frames(e)).hasSize(1);
      assertThat(all(e, Effect.JournalSync.class)).isEmpty();
    }

    @Test
    void recoveredCallsAreResentAtStartWithTheirNumbersOnTheResumedSession() {
      TreeMap<Long, Operation> left = new TreeMap<>();
      left.put(5L, append("a"));
      left.put(6L, append("b"));
      MachineHarness h =
          MachineHarness.durable(
              4, new SessionMachine.Recovery(new SessionMachine.Identity("me", 9, 1, 2), 0, left));
      assertThat(h.m.recovered()).extracting(SessionMachine.Call::seq).containsExactly(5L, 6L);
      h.m.start(h.now);
      Effect.Register r = only(h.effects(), Effect.Register.class);
      assertThat(r.request().getResume()).isTrue();
      assertThat(r.request().getSecretHi()).isEqualTo(1);
      assertThat(r.request().getSecretLo()).isEqualTo(2);
      assertThat(h.all).noneMatch(e -> e instanceof Effect.JournalPending);
      SessionMachine.Call next = h.submit("c");
      h.m.registerReplied(r.nonce(), granted(9, 5, 8, null).toBuilder().setEpoch(1).build(), h.now);
      List<Effect> e = h.effects();
      assertThat(sentSeqs(e)).containsExactly(5L, 6L, 7L);
      assertThat(next.seq()).isEqualTo(7);
      assertThat(only(e, Effect.OpenStream.class).hello().getEpoch()).isEqualTo(1);
      assertThat(all(e, Effect.JournalIdentity.class)).isEmpty(); // the identity is unchanged
    }

    @Test
    void aNewSessionsSecretIsChosenHereJournaledAndResentWithEveryRetryOfTheAttempt() {
      MachineHarness h = MachineHarness.durable(4, SessionMachine.Recovery.NONE);
      h.submit("v1");
      List<Effect> e = h.effects();
      Effect.JournalPending journaled = only(e, Effect.JournalPending.class);
      Effect.Register first = only(e, Effect.Register.class);
      assertThat(first.request().getSecretHi()).isNotZero().isEqualTo(journaled.secretHi());
      assertThat(first.request().getSecretLo()).isNotZero().isEqualTo(journaled.secretLo());
      h.m.registerFailed(first.nonce(), h.now); // the answer was lost: the same attempt again
      h.now += 10_000 * MachineHarness.MS;
      h.m.tick(h.now);
      Effect.Register retry = only(h.effects(), Effect.Register.class);
      assertThat(retry.request()).isEqualTo(first.request());
    }

    @Test
    void aPendingRegistrationIsRetriedWithTheSecretItChose() {
      MachineHarness h =
          MachineHarness.durable(
              4, new SessionMachine.Recovery(null, 777, 41, 42, new TreeMap<>()));
      h.submit("v1");
      Effect.Register r = only(h.effects(), Effect.Register.class);
      assertThat(r.nonce()).isEqualTo(777);
      assertThat(r.request().getSecretHi()).isEqualTo(41);
      assertThat(r.request().getSecretLo()).isEqualTo(42);
    }

    @Test
    void aPendingRegistrationFromAPreviousInstanceIsRetriedWithItsNonce() {
      MachineHarness h =
          MachineHarness.durable(4, new SessionMachine.Recovery(null, 777, new TreeMap<>()));
      h.submit("v1");
      List<Effect> e = h.effects();
      assertThat(only(e, Effect.Register.class).nonce()).isEqualTo(777);
      assertThat(all(e, Effect.JournalPending.class)).isEmpty();
    }

    @Test
    void aResumeRefusedAsExpiredForgetsTheIdentityAndRegistersAfresh() {
      TreeMap<Long, Operation> left = new TreeMap<>();
      left.put(5L, append("a"));
      MachineHarness h =
          MachineHarness.durable(
              4, new SessionMachine.Recovery(new SessionMachine.Identity("me", 9, 1, 2), 0, left));
      h.m.start(h.now);
      SessionMachine.Call c = h.submit("new");
      long n = h.registerNonce(h.effects());
      h.m.registerReplied(
          n, RegisterReply.newBuilder().setCode(Code.SESSION_EXPIRED).build(), h.now);
      List<Effect> e = h.effects();
      CompletableFuture<?> lost = h.m.recovered().get(0).future();
      assertThat(lost).isCompletedExceptionally();
      assertThat(e).contains(new Effect.JournalForget());
      Effect.Register fresh = only(e, Effect.Register.class);
      assertThat(fresh.request().getResume()).isFalse();
      assertThat(fresh.nonce()).isNotEqualTo(n);
      assertThat(c.future()).isNotDone();
    }

    @Test
    void aJournalFailureClosesTheClientWithAnIdentityFileError() {
      MachineHarness h = MachineHarness.durable(4, SessionMachine.Recovery.NONE);
      SessionMachine.Call c = h.submit("v1");
      h.register(9);
      h.m.journalFailed(new IOException("disk full"));
      h.effects();
      IdentityFileException x = failure(c, IdentityFileException.class);
      assertThat(x).hasMessageContaining("disk full");
      assertThat(x.isFatal()).isTrue();
      assertThat(h.m.state()).isEqualTo(State.CLOSED);
    }
  }

  /** Failover probes (issue 16): asking the other servers who leads while the server is silent. */
  @Nested
  class Probes {
    final MachineHarness h = MachineHarness.anonymous(3);
    SessionMachine.Call c1;
    SessionMachine.Call c2;

    void connectAndGoSilent() {
      c1 = h.submit("v1");
      c2 = h.submit("v2");
      h.register(42);
      h.advance(PROBE + 1);
    }

    static SessionMachine.ProbeAnswer says(String from, long term, String leader) {
      return new SessionMachine.ProbeAnswer(from, term, leader);
    }

    @Test
    void aSilentServerWithCallsWaitingIsProbedAfterTheIntervalOneRoundAtATime() {
      c1 = h.submit("v1");
      h.register(42);
      h.advance(PROBE);
      assertThat(all(h.effects(), Effect.Probe.class)).isEmpty();
      h.advance(1);
      assertThat(h.effects()).containsExactly(new Effect.Probe(1, List.of("b:2", "c:3")));
      h.advance(PROBE);
      assertThat(h.effects()).isEmpty(); // the round is still out
      h.m.probed(1, List.of(), h.now);
      h.advance(1);
      assertThat(only(h.effects(), Effect.Probe.class).round()).isEqualTo(2);
    }

    @Test
    void whileTheSilenceLastsTheNextRoundGoesAfterTheShortRepeatInterval() {
      connectAndGoSilent();
      assertThat(only(h.effects(), Effect.Probe.class).round()).isEqualTo(1);
      h.m.probed(1, List.of(says("b:2", 8, "a:1")), h.now);
      h.advance(SessionMachine.PROBE_REPEAT_NANOS - 1);
      assertThat(h.effects()).isEmpty();
      h.advance(1);
      assertThat(only(h.effects(), Effect.Probe.class).round()).isEqualTo(2);
    }

    @Test
    void anIdleSessionAndAnsweredCallsAreNeverProbed() {
      c1 = h.submit("v1");
      h.register(42);
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      h.effects();
      h.advance(STALL - MS);
      assertThat(all(h.effects(), Effect.Probe.class)).isEmpty();
    }

    @Test
    void aNewerLeaderNamedByTheProbeTakesEverythingOutstandingWithTheSameNumbers() {
      connectAndGoSilent();
      int old = h.stream();
      h.effects();
      h.m.probed(1, List.of(says("b:2", 8, "c:3"), says("c:3", 8, "c:3")), h.now);
      List<Effect> e = h.effects();
      assertThat(e.get(0)).isEqualTo(new Effect.EndStream(old, true));
      assertThat(only(e, Effect.OpenStream.class).address()).isEqualTo("c:3");
      assertThat(sentSeqs(e)).containsExactly(1L, 2L);
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
      assertThat(h.m.leaderHint()).isEqualTo("c:3");
      assertThat(h.m.probeSwitches()).isEqualTo(1);
      // The old leader, resumed, answers late on its stream: ignored; the new one's answer counts.
      h.m.frame(old, answer(1, Code.OK, 1, false), h.now);
      h.effects();
      assertThat(c1.future()).isNotDone();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, true), h.now);
      h.effects();
      assertThat(c1.future()).isCompleted();
      assertThat(h.m.duplicates()).isEqualTo(1);
    }

    @Test
    void theAnswerOfTheHighestTermDecides() {
      connectAndGoSilent();
      h.effects();
      h.m.probed(1, List.of(says("b:2", 9, "b:2"), says("c:3", 8, "a:1")), h.now);
      assertThat(only(h.effects(), Effect.OpenStream.class).address()).isEqualTo("b:2");
    }

    @Test
    void aSilentServerTheOthersStillFollowIsKept() {
      connectAndGoSilent();
      h.effects();
      h.m.probed(1, List.of(says("b:2", 8, "a:1"), says("c:3", 8, "a:1")), h.now);
      assertThat(h.effects()).isEmpty();
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
      assertThat(h.m.probeSwitches()).isZero();
    }

    @Test
    void anElectionWithNoLeaderYetChangesNothingAndTheNextRoundMoves() {
      connectAndGoSilent();
      h.effects();
      h.m.probed(1, List.of(says("b:2", 9, ""), says("c:3", 9, "")), h.now);
      assertThat(h.effects()).isEmpty();
      h.advance(PROBE);
      assertThat(only(h.effects(), Effect.Probe.class).round()).isEqualTo(2);
      h.m.probed(2, List.of(says("b:2", 9, "b:2")), h.now);
      assertThat(only(h.effects(), Effect.OpenStream.class).address()).isEqualTo("b:2");
    }

    @Test
    void anAnswerBehindATermHeardBeforeIsIgnored() {
      connectAndGoSilent();
      h.effects();
      h.m.probed(1, List.of(says("b:2", 8, "a:1")), h.now);
      h.advance(PROBE);
      h.effects();
      h.m.probed(2, List.of(says("c:3", 7, "c:3")), h.now); // a lagging server's old leader
      assertThat(h.effects()).isEmpty();
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
    }

    @Test
    void answersOfAnotherRoundOrAfterTheCallsWereAnsweredChangeNothing() {
      connectAndGoSilent();
      h.effects();
      h.m.probed(7, List.of(says("b:2", 8, "b:2")), h.now);
      assertThat(h.effects()).isEmpty();
      h.m.frame(h.stream(), answer(1, Code.OK, 1, false), h.now);
      h.m.frame(h.stream(), answer(2, Code.OK, 2, false), h.now);
      h.effects();
      h.m.probed(1, List.of(says("b:2", 8, "b:2")), h.now);
      assertThat(all(h.effects(), Effect.OpenStream.class)).isEmpty();
      assertThat(h.m.leaderHint()).isEmpty();
    }

    @Test
    void inReconnectBackoffAProbeAsksEveryServerAndCutsTheBackoffShort() {
      c1 = h.submit("v1");
      h.register(42);
      // Redirected again and again around an election: NOT_LEADER without a hint.
      for (int i = 0; i < 4; i++) {
        h.m.frame(h.stream(), sessionFrame(Code.NOT_LEADER, ""), h.now);
        h.advance(SessionMachine.MAX_BACKOFF_NANOS);
        h.effects();
      }
      h.m.frame(h.stream(), sessionFrame(Code.NOT_LEADER, ""), h.now);
      h.effects();
      assertThat(h.m.state()).isEqualTo(State.RECONNECT_BACKOFF);
      h.advance(MS);
      Effect.Probe p = only(h.effects(), Effect.Probe.class);
      assertThat(p.addresses()).containsExactly("a:1", "b:2", "c:3");
      h.m.probed(p.round(), List.of(says("a:1", 3, "c:3")), h.now);
      List<Effect> e = h.effects();
      assertThat(only(e, Effect.OpenStream.class).address()).isEqualTo("c:3");
      assertThat(sentSeqs(e)).containsExactly(1L);
      assertThat(h.m.state()).isEqualTo(State.CONNECTED);
    }
  }
}
