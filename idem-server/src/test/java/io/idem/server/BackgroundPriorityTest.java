package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class BackgroundPriorityTest {
  @Test
  void aThreadLowersItsOwnPriorityAndNoOtherThreads() throws Exception {
    assumeTrue(Files.isSymbolicLink(Path.of("/proc/thread-self")), "Linux only");
    Path mine =
        Path.of(
            "/proc/self/task",
            Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString(),
            "stat");
    int before = BackgroundPriority.nice(mine);
    AtomicReference<Boolean> lowered = new AtomicReference<>();
    AtomicInteger niceThere = new AtomicInteger();
    Thread t =
        new Thread(
            () -> {
              lowered.set(BackgroundPriority.lowerThisThread());
              try {
                String tid =
                    Files.readSymbolicLink(Path.of("/proc/thread-self")).getFileName().toString();
                niceThere.set(BackgroundPriority.nice(Path.of("/proc/self/task", tid, "stat")));
              } catch (Exception e) {
                niceThere.set(Integer.MIN_VALUE);
              }
            });
    t.start();
    t.join(30_000);
    assertThat(lowered.get()).isTrue();
    assertThat(niceThere.get()).isGreaterThan(before).isLessThanOrEqualTo(19);
    assertThat(BackgroundPriority.nice(mine)).isEqualTo(before);
  }
}
