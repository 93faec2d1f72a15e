package io.idem.scenarios;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.proto.Code;
import io.idem.proto.Increment;
import io.idem.proto.Operation;
import io.idem.proto.RegisterRequest;
import io.idem.proto.ServerFrame;
import io.idem.testkit.LocalCluster;
import io.idem.testkit.RawSession;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A real single node on loopback, driven through the raw protocol: pipelining and a duplicate. */
@Timeout(60)
class SingleNodeTest {
  @TempDir Path dir;

  @Test
  void registerThenPipelinedIncrementsThenDuplicate() throws Exception {
    try (LocalCluster cluster = LocalCluster.start(1, dir)) {
      Sessions.Registered reg =
          Sessions.register(
              cluster, RegisterRequest.newBuilder().setTtlMs(30_000).setNonce(1).build());
      Operation incr =
          Operation.newBuilder()
              .setIncrement(Increment.newBuilder().setKey("c").setDelta(1))
              .build();
      try (RawSession raw = new RawSession(cluster.clientAddress(0))) {
        raw.open(reg.grant());
        for (int seq = 1; seq <= 100; seq++) {
          raw.send(seq, 1, incr);
        }
        for (int seq = 1; seq <= 100; seq++) {
          ServerFrame f = raw.answerTo(seq);
          assertThat(f.getResult().getCode()).isEqualTo(Code.OK);
          assertThat(f.getResult().getNumber()).isEqualTo(seq);
        }
        // A retry of request 50: the saved answer, not a 101st increment.
        raw.send(50, 1, incr);
        ServerFrame dup = raw.answerTo(50);
        assertThat(dup.getDuplicate()).isTrue();
        assertThat(dup.getResult().getNumber()).isEqualTo(50);
      }
      assertThat(cluster.node(0).status().getDuplicatesSuppressed()).isEqualTo(1);
      cluster.awaitEqualDigests(Duration.ofSeconds(10));
    }
  }
}
