package io.idem.kafka.spring;

import io.idem.kafka.DeadLetters;
import java.util.Objects;
import org.springframework.kafka.listener.DeadLetterPublishingRecoverer;

/**
 * Dead letters published by Spring Kafka's {@link DeadLetterPublishingRecoverer}, so that a
 * receiver's poison records go where, and with the {@code kafka_dlt-*} headers, the application's
 * listeners already send theirs (by default the same partition of {@code <topic>-dlt}, which needs
 * at least as many partitions as the topic).
 *
 * <p>The receiver skips a record once {@link DeadLetters#publish} returns, so the recoverer must
 * throw when the send fails: keep its {@code failIfSendResultIsError} (the default). A recoverer
 * that publishes nothing for a record (its destination resolver gives null, or it skips a fatal
 * exception routed back to the same topic) makes the receiver skip it unpublished.
 */
public final class SpringDeadLetters {
  private SpringDeadLetters() {}

  /**
   * Publishes each record with {@code recoverer}, handing it the record's last failure (wrapped in
   * an {@link IllegalStateException} if it is not an {@link Exception}); the recoverer's send
   * result is awaited as it is configured to.
   */
  public static <K, V> DeadLetters<K, V> of(DeadLetterPublishingRecoverer recoverer) {
    Objects.requireNonNull(recoverer, "recoverer");
    return (record, cause, attempts) ->
        recoverer.accept(
            record,
            null,
            cause instanceof Exception e
                ? e
                : new IllegalStateException("failed " + attempts + " times", cause));
  }
}
