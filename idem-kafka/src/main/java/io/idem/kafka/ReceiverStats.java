package io.idem.kafka;

import java.util.concurrent.atomic.LongAdder;

/** Counts of what an {@link ExactlyOnceConsumer} did; read from any thread. */
public final class ReceiverStats {
  private final LongAdder polled = new LongAdder();
  private final LongAdder applied = new LongAdder();
  private final LongAdder duplicates = new LongAdder();
  private final LongAdder failures = new LongAdder();
  private final LongAdder deadLettered = new LongAdder();
  private final LongAdder fenced = new LongAdder();
  private final LongAdder claims = new LongAdder();
  private final LongAdder storeErrors = new LongAdder();

  ReceiverStats() {}

  void polled(long n) {
    polled.add(n);
  }

  void committed(long appliedRecords, long duplicateRecords) {
    applied.add(appliedRecords);
    duplicates.add(duplicateRecords);
  }

  void failed() {
    failures.increment();
  }

  void deadLetter() {
    deadLettered.increment();
  }

  void fence() {
    fenced.increment();
  }

  void claimed() {
    claims.increment();
  }

  void storeError() {
    storeErrors.increment();
  }

  /** Records handed to the store (a record polled again after a failure counts again). */
  public long polled() {
    return polled.sum();
  }

  /** Records whose effect and offset this consumer committed. */
  public long applied() {
    return applied.sum();
  }

  /** Records the store found applied before (by their key), committed with no effect now. */
  public long duplicates() {
    return duplicates.sum();
  }

  /** Failed attempts of records (a handler's exception, a refused effect). */
  public long failures() {
    return failures.sum();
  }

  /** Records published to the dead letters and skipped. */
  public long deadLettered() {
    return deadLettered.sum();
  }

  /** Commits the store refused because a newer claim held the partition. */
  public long fenced() {
    return fenced.sum();
  }

  /** Partitions claimed in the store. */
  public long claims() {
    return claims.sum();
  }

  /** Claims and batches whose store outcome was an error or unknown. */
  public long storeErrors() {
    return storeErrors.sum();
  }

  @Override
  public String toString() {
    return "applied="
        + applied()
        + " duplicates="
        + duplicates()
        + " failures="
        + failures()
        + " deadLettered="
        + deadLettered()
        + " fenced="
        + fenced()
        + " claims="
        + claims()
        + " storeErrors="
        + storeErrors();
  }
}
