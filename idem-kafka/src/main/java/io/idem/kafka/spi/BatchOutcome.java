package io.idem.kafka.spi;

/**
 * How a store's {@link ReceiverStore#process} of one partition's records ended. Records are applied
 * in offset order, each with its effect and the partition's offset in one atomic step, so the
 * outcome is the position reached and, if it stopped early, why.
 */
public sealed interface BatchOutcome {

  /** The partition's committed position (the next offset to consume) after the call. */
  long position();

  /**
   * Every record was applied (or found applied before: a resend, or a duplicate by its key).
   *
   * @param position the committed position after the last record
   * @param duplicates how many of the records were found applied before and did nothing now
   */
  record Committed(long position, int duplicates) implements BatchOutcome {}

  /**
   * The records below {@code failedOffset} were committed; the record at {@code failedOffset} was
   * not, and nothing of it was applied.
   *
   * @param position the committed position
   * @param failedOffset the offset of the record that stopped the batch
   * @param cause what stopped it: the handler's exception, or the store's refusal of its effect
   * @param attempt whether this counts as a failed attempt of the record (toward dead-lettering):
   *     true for the handler's failures and refused effects, false for a wait on another owner of
   *     the record's key
   */
  record Stopped(long position, long failedOffset, Throwable cause, boolean attempt)
      implements BatchOutcome {}

  /**
   * A newer claim holds the partition in the store: this consumer lost it. Nothing was applied.
   *
   * @param position the committed position
   * @param epoch the store's current epoch
   */
  record Fenced(long position, long epoch) implements BatchOutcome {}
}
