package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

class SnapshotStaggerTest {
  private static final List<String> PEERS = List.of("n3", "n1", "n2");

  @Test
  void followersWriteFirstInIdOrderAndTheLeaderLast() {
    assertThat(SnapshotStagger.position("n1", PEERS, "n2")).isZero();
    assertThat(SnapshotStagger.position("n3", PEERS, "n2")).isEqualTo(1);
    assertThat(SnapshotStagger.position("n2", PEERS, "n2")).isEqualTo(2);

    assertThat(SnapshotStagger.position("n2", PEERS, "n1")).isZero();
    assertThat(SnapshotStagger.position("n3", PEERS, "n1")).isEqualTo(1);
    assertThat(SnapshotStagger.position("n1", PEERS, "n1")).isEqualTo(2);
  }

  @Test
  void withoutALeaderOrOutsideTheConfigurationNodesGoInIdOrder() {
    assertThat(SnapshotStagger.position("n1", PEERS, null)).isZero();
    assertThat(SnapshotStagger.position("n2", PEERS, null)).isEqualTo(1);
    assertThat(SnapshotStagger.position("n3", PEERS, null)).isEqualTo(2);
    // A leader the node does not know as a member (a configuration change under way).
    assertThat(SnapshotStagger.position("n3", PEERS, "n9")).isEqualTo(2);
    // A node that is not a voting member waits for no one.
    assertThat(SnapshotStagger.position("n4", PEERS, "n1")).isZero();
    assertThat(SnapshotStagger.position("n1", List.of("n1"), "n1")).isZero();
  }

  @Test
  void aSlotIsAQuarterLongerThanTheLastWriteWithinItsBounds() {
    SnapshotStagger s = new SnapshotStagger();
    assertThat(s.delay(0)).isZero();
    assertThat(s.delay(2)).isEqualTo(SnapshotStagger.FIRST_SLOT.multipliedBy(2));

    s.wrote(Duration.ofSeconds(4));
    assertThat(s.delay(1)).isEqualTo(Duration.ofSeconds(5));
    assertThat(s.delay(2)).isEqualTo(Duration.ofSeconds(10));

    s.wrote(Duration.ofMillis(2));
    assertThat(s.delay(1)).isEqualTo(SnapshotStagger.MIN_SLOT);

    s.wrote(Duration.ofMinutes(5));
    assertThat(s.delay(1)).isEqualTo(SnapshotStagger.MAX_SLOT);
  }
}
