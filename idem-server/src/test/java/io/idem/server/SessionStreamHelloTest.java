package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.stub.ServerCallStreamObserver;
import io.idem.core.SessionTableConfig;
import io.idem.proto.ClientFrame;
import io.idem.proto.Code;
import io.idem.proto.EntryResult;
import io.idem.proto.GetKeyReply;
import io.idem.proto.GetKeyRequest;
import io.idem.proto.GetReply;
import io.idem.proto.Hello;
import io.idem.proto.LogEntry;
import io.idem.proto.ServerFrame;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A session stream's Hello for a session the node's state does not hold: {@code SESSION_EXPIRED}
 * (the client registers anew and gives up its calls' outcomes) only from a leader that has applied
 * its log; a leader still applying it answers {@code NOT_LEADER} so the client tries again. Found
 * in a 10-minute 8-group campaign: a client process lost its metadata session after the grouped
 * wipe, and its recovered calls then came back {@code RESPONSE_DISCARDED} under a new client id.
 */
class SessionStreamHelloTest {
  private final IdemStateMachine machine =
      new IdemStateMachine(ReplicatedConfig.DEFAULTS, 1_000_000, new ServerMetrics("n1"));

  @Test
  void aLeaderStillApplyingItsLogDoesNotSayASessionExpired() {
    ServerFrame answer = hello(new Log(true, false));
    assertThat(answer.getResult().getCode()).isEqualTo(Code.NOT_LEADER);
    assertThat(answer.getResult().getMessage())
        .isEqualTo(
            "the leader is still applying its log and does not know session 4096 yet: retry");
    assertThat(answer.getLeaderHint()).isEqualTo("127.0.0.1:7001");
  }

  @Test
  void aReadyLeaderSaysAnUnknownSessionExpired() {
    ServerFrame answer = hello(new Log(true, true));
    assertThat(answer.getResult().getCode()).isEqualTo(Code.SESSION_EXPIRED);
    assertThat(answer.getResult().getMessage())
        .isEqualTo("no session 4096: it expired or never existed");
  }

  @Test
  void aFollowerSendsTheClientToTheLeader() {
    ServerFrame answer = hello(new Log(false, false));
    assertThat(answer.getResult().getCode()).isEqualTo(Code.NOT_LEADER);
    assertThat(answer.getResult().getMessage()).isEqualTo("not the leader");
  }

  /**
   * Opens a stream on {@code log}, sends a Hello for client id 4096, and returns the one answer.
   */
  private ServerFrame hello(Log log) {
    Frames out = new Frames();
    SessionStream stream =
        new SessionStream(
            log,
            null, // a Hello sends nothing to the log
            machine,
            new ServerMetrics("n1"),
            new Outbox.Bounds(SessionTableConfig.MAX_WINDOW, 4L << 20, 1_000),
            out,
            null);
    stream.onNext(
        ClientFrame.newBuilder()
            .setHello(Hello.newBuilder().setClientId(4096).setSecretHi(1).setSecretLo(2))
            .build());
    assertThat(out.frames).as("the frames written").hasSize(1);
    assertThat(out.completed).as("the stream ended").isTrue();
    return out.frames.get(0);
  }

  /** A log that leads, or not, and is ready, or not; nothing is appended or read. */
  private record Log(boolean leader, boolean ready) implements ReplicatedLog {
    @Override
    public CompletableFuture<EntryResult> append(LogEntry entry) {
      throw new AssertionError("a Hello appends nothing");
    }

    @Override
    public CompletableFuture<GetReply> read(String key, String principal) {
      throw new AssertionError("a Hello reads nothing");
    }

    @Override
    public CompletableFuture<GetKeyReply> readKey(GetKeyRequest request, String principal) {
      throw new AssertionError("a Hello reads nothing");
    }

    @Override
    public boolean isLeader() {
      return leader;
    }

    @Override
    public boolean isLeaderReady() {
      return leader && ready;
    }

    @Override
    public String leaderClientAddress() {
      return "127.0.0.1:7001";
    }
  }

  /** The stream's transport: always ready, keeps what is written. */
  private static final class Frames extends ServerCallStreamObserver<ServerFrame> {
    final List<ServerFrame> frames = new ArrayList<>();
    boolean completed;

    @Override
    public void onNext(ServerFrame value) {
      frames.add(value);
    }

    @Override
    public void onError(Throwable t) {
      throw new AssertionError(t);
    }

    @Override
    public void onCompleted() {
      completed = true;
    }

    @Override
    public boolean isReady() {
      return true;
    }

    @Override
    public void setOnReadyHandler(Runnable onReadyHandler) {}

    @Override
    public void disableAutoInboundFlowControl() {}

    @Override
    public void disableAutoRequest() {}

    @Override
    public void request(int count) {}

    @Override
    public void setMessageCompression(boolean enable) {}

    @Override
    public boolean isCancelled() {
      return false;
    }

    @Override
    public void setOnCancelHandler(Runnable onCancelHandler) {}

    @Override
    public void setCompression(String compression) {}
  }
}
