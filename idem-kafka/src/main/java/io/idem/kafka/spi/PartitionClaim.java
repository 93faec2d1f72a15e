package io.idem.kafka.spi;

/**
 * A store's answer to a claim of a partition for a consumer group: the claim's epoch, which fences
 * every earlier claimant in the store, and the offset committed so far.
 *
 * @param epoch the claim's epoch, above 0; every commit under this claim names it
 * @param position the next offset to consume, as committed in the store; -1 if none yet (the
 *     consumer then starts where Kafka's committed offset or {@code auto.offset.reset} says)
 */
public record PartitionClaim(long epoch, long position) {
  public PartitionClaim {
    if (epoch <= 0) {
      throw new IllegalArgumentException("a claim's epoch must be above 0, got " + epoch);
    }
    if (position < -1) {
      throw new IllegalArgumentException("a position is -1 or an offset, got " + position);
    }
  }
}
