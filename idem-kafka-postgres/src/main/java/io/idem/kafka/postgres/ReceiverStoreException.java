package io.idem.kafka.postgres;

import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;

/**
 * PostgreSQL, the driver or the pool failed, or the store refused a call (closed, its queue full):
 * the outcome is unknown, never a yes. A batch's transaction either committed whole or not at all,
 * so resending the records from the last position the store gave is safe: what committed is
 * skipped.
 */
public final class ReceiverStoreException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final @Nullable String group;
  private final @Nullable TopicPartition partition;

  /**
   * With the consumer group and partition of the call (null for a call about neither, such as a
   * migration), what happened, and the cause if any.
   */
  public ReceiverStoreException(
      @Nullable String group,
      @Nullable TopicPartition partition,
      String message,
      @Nullable Throwable cause) {
    super(group == null ? message : group + " " + partition + ": " + message, cause);
    this.group = group;
    this.partition = partition;
  }

  /** The consumer group of the failed call, or null. */
  public @Nullable String group() {
    return group;
  }

  /** The partition of the failed call, or null. */
  public @Nullable TopicPartition partition() {
    return partition;
  }
}
