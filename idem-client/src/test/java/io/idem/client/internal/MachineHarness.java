package io.idem.client.internal;

import com.google.protobuf.ByteString;
import io.idem.proto.Append;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.Limits;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.Result;
import io.idem.proto.ServerFrame;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Drives a {@link SessionMachine} by hand in tests: a clock that moves only when told, nonces from
 * a counter, and the effects of each step collected for inspection. Completes the calls' futures as
 * the driver would, so tests can look at outcomes.
 */
final class MachineHarness {
  static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
  static final List<String> SERVERS = List.of("a:1", "b:2", "c:3");
  static final long STALL = 1_000 * MS;
  static final long KEEPALIVE = 20_000 * MS;
  static final long PROBE = 300 * MS;

  long now = 5_000_000 * MS;
  long nextNonce = 100;
  final SessionMachine m;
  final List<Effect> all = new ArrayList<>();

  MachineHarness(int window, String name, boolean durable, SessionMachine.Recovery recovery) {
    m =
        new SessionMachine(
            new SessionMachine.Settings(
                SERVERS, window, 60_000, KEEPALIVE, STALL, PROBE, name, durable),
            () -> nextNonce++,
            recovery);
  }

  static MachineHarness anonymous(int window) {
    return new MachineHarness(window, null, false, SessionMachine.Recovery.NONE);
  }

  static MachineHarness durable(int window, SessionMachine.Recovery recovery) {
    return new MachineHarness(window, "me", true, recovery);
  }

  /** The effects since the last call, with Complete and Fail applied to their futures. */
  List<Effect> effects() {
    List<Effect> out = m.takeEffects();
    for (Effect e : out) {
      if (e instanceof Effect.Complete c) {
        c.call().future().complete(c.frame());
      } else if (e instanceof Effect.Fail f) {
        f.call().future().completeExceptionally(f.error());
      }
    }
    all.addAll(out);
    return out;
  }

  static Operation append(String value) {
    return Operation.newBuilder()
        .setAppend(
            Append.newBuilder()
                .setKey("list")
                .setValue(ByteString.copyFrom(value, StandardCharsets.UTF_8)))
        .build();
  }

  SessionMachine.Call submit(String value) {
    return submit(append(value), 60_000 * MS);
  }

  SessionMachine.Call submit(Operation op, long timeout) {
    SessionMachine.Call c = new SessionMachine.Call(op, now + timeout);
    m.submit(c, now);
    return c;
  }

  void advance(long nanos) {
    now += nanos;
    m.tick(now);
  }

  /** The last Register effect's nonce. */
  long registerNonce(List<Effect> effects) {
    return only(effects, Effect.Register.class).nonce();
  }

  static RegisterReply granted(long clientId, long nextSeq, int window, Limits limits) {
    RegisterReply.Builder r =
        RegisterReply.newBuilder()
            .setCode(Code.OK)
            .setClientId(clientId)
            .setNextSeq(nextSeq)
            .setSecretHi(7)
            .setSecretLo(8)
            .setWindow(window);
    if (limits != null) {
      r.setLimits(limits);
    }
    return r.build();
  }

  /** Registers (answering the pending Register) and returns the effects of the grant. */
  List<Effect> register(long clientId) {
    long n = registerNonce(effects());
    m.registerReplied(n, granted(clientId, 1, 128, null), now);
    return effects();
  }

  static ServerFrame answer(long seq, Code code, long number, boolean duplicate) {
    return ServerFrame.newBuilder()
        .setSeq(seq)
        .setResult(Result.newBuilder().setCode(code).setNumber(number).setRevision(seq + 10))
        .setDuplicate(duplicate)
        .build();
  }

  static ServerFrame sessionFrame(Code code, String hint) {
    return ServerFrame.newBuilder()
        .setSeq(0)
        .setResult(Result.newBuilder().setCode(code))
        .setLeaderHint(hint)
        .build();
  }

  /** The stream id of the currently open stream (the last OpenStream seen). */
  int stream() {
    int id = -1;
    for (Effect e : all) {
      if (e instanceof Effect.OpenStream o) {
        id = o.stream();
      }
    }
    return id;
  }

  static List<Long> sentSeqs(List<Effect> effects) {
    List<Long> out = new ArrayList<>();
    for (Effect e : effects) {
      if (e instanceof Effect.Send s && s.frame().hasRequest()) {
        out.add(s.frame().getRequest().getSeq());
      }
    }
    return out;
  }

  static List<ClientFrame> frames(List<Effect> effects) {
    List<ClientFrame> out = new ArrayList<>();
    for (Effect e : effects) {
      if (e instanceof Effect.Send s) {
        out.add(s.frame());
      }
    }
    return out;
  }

  static <T extends Effect> T only(List<Effect> effects, Class<T> type) {
    T found = null;
    for (Effect e : effects) {
      if (type.isInstance(e)) {
        if (found != null) {
          throw new AssertionError("more than one " + type.getSimpleName() + " in " + effects);
        }
        found = type.cast(e);
      }
    }
    if (found == null) {
      throw new AssertionError("no " + type.getSimpleName() + " in " + effects);
    }
    return found;
  }

  static <T extends Effect> List<T> all(List<Effect> effects, Class<T> type) {
    List<T> out = new ArrayList<>();
    for (Effect e : effects) {
      if (type.isInstance(e)) {
        out.add(type.cast(e));
      }
    }
    return out;
  }
}
