package io.idem.core;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * Exactly-once through a hostile network: at least 1,000,000 operations from 100 pipelining
 * clients, with drops, duplicates, reordering delays, pauses past the TTL, client crashes resumed
 * from a journal, and snapshot restores of the table. Zero violations allowed.
 *
 * <p>Each run draws a fresh seed and prints it; replay one with {@code ./mvnw -pl idem-core test
 * -Dtest=NetworkSimulationTest -Didem.sim.seed=<seed>}.
 */
class NetworkSimulationTest {

  static final LossyNetworkSimulation.Params DEFAULT =
      new LossyNetworkSimulation.Params(
          100, // clients, half of them named (resumable)
          10_000, // operations per client: 1,000,000 in all
          16, // client window
          16, // table window
          1_000, // max sessions
          3_000, // session TTL, ms
          0.05, // drop
          0.03, // duplicate
          0.05, // long (reordering) delay
          0.0004, // pause per 50 ms tick
          0.0004, // crash per 50 ms tick (named clients)
          2_000); // snapshot and restore period, ms

  static long seed() {
    String given = System.getProperty("idem.sim.seed", "");
    return given.isBlank() ? System.nanoTime() : Long.parseLong(given.trim());
  }

  @Test
  void everyOperationAppliedAtMostOnceAndEveryAcknowledgedOneExactlyOnce() {
    long seed = seed();
    System.out.println("NetworkSimulationTest seed " + seed);
    LossyNetworkSimulation.Result r;
    try {
      r = new LossyNetworkSimulation(seed, DEFAULT).run();
    } catch (AssertionError | RuntimeException e) {
      throw new AssertionError(
          "simulation failed with seed " + seed + "; replay with -Didem.sim.seed=" + seed, e);
    }
    System.out.println("NetworkSimulationTest " + r);
    assertThat(r.opsAcknowledged() + r.opsAbandoned()).isEqualTo(1_000_000);
    assertThat(r.opsAcknowledged()).isGreaterThan(990_000);
    // The faults really happened.
    assertThat(r.messagesDropped()).isPositive();
    assertThat(r.messagesDuplicated()).isPositive();
    assertThat(r.duplicatesSuppressed()).isPositive();
    assertThat(r.snapshotRestores()).isPositive();
    assertThat(r.crashes()).isPositive();
    assertThat(r.pauses()).isPositive();
    assertThat(r.expiredSessions()).isPositive();
    assertThat(r.rejections()).containsKeys(RejectCode.OUT_OF_ORDER, RejectCode.FENCED);
  }

  @Test
  void sameSeedSameRun() {
    LossyNetworkSimulation.Params small =
        new LossyNetworkSimulation.Params(
            10, 500, 8, 8, 100, 1_000, 0.1, 0.05, 0.1, 0.002, 0.002, 500);
    long seed = seed();
    assertThat(new LossyNetworkSimulation(seed, small).run())
        .as("seed %d", seed)
        .isEqualTo(new LossyNetworkSimulation(seed, small).run());
  }
}
