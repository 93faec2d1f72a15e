package io.idem.scenarios.regressions;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.proto.Code;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.RegisterReply;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 11, item 6: a client that pipelined requests and half-closed its stream lost answers (a
 * Python client sent 127 requests, half-closed, and got 109 answers although all 127 were applied):
 * the front door ended the stream at the half-close. It now ends it once every answer owed has been
 * sent.
 */
@Timeout(60)
class HalfCloseDrainTest {
  @TempDir Path dir;

  private static final int N = 127;

  @Test
  void everyAnswerOwedIsSentAfterAHalfCloseThenTheStreamEnds() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      cluster.waitForLeader(Duration.ofSeconds(30));
      try (RawSession raw = new RawSession(cluster.clientAddress(0))) {
        RegisterReply grant =
            raw.register(RegisterRequest.newBuilder().setTtlMs(60_000).setNonce(1).build());
        assertThat(grant.getCode()).isEqualTo(Code.OK);
        raw.open(grant);
        Operation incr =
            Operation.newBuilder()
                .setIncrement(Increment.newBuilder().setKey("n").setDelta(1))
                .build();
        for (long seq = 1; seq <= N; seq++) {
          raw.send(seq, 1, incr);
        }
        raw.halfClose();

        // Once the answers are out, not at the front door's bound (5 s) for a stuck stream.
        assertThat(raw.awaitEnd(Duration.ofSeconds(4)))
            .as("the server ends the stream once nothing is owed")
            .isTrue();
        TreeSet<Long> answered = new TreeSet<>();
        for (ServerFrame f = raw.poll(); f != null; f = raw.poll()) {
          assertThat(f.getResult().getCode()).isEqualTo(Code.OK);
          assertThat(f.getResult().getNumber()).isEqualTo(f.getSeq());
          answered.add(f.getSeq());
        }
        assertThat(answered).as("answers received before the end").hasSize(N);
        assertThat(answered.first()).isEqualTo(1);
        assertThat(answered.last()).isEqualTo(N);
      }
    }
  }
}
