package io.idem.kafka.spring;

import io.idem.kafka.ReceiverStats;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.Objects;
import java.util.function.ToLongFunction;

/**
 * The receivers' {@link ReceiverStats} as Micrometer meters, tagged {@code receiver} (its name) and
 * {@code group}. Counters count since the receiver last started (a restart of the context's
 * lifecycle starts them again, which monitoring reads as a counter reset).
 *
 * <ul>
 *   <li>{@value #RECORDS} (counter), tag {@code outcome}: {@code applied} (effect and offset
 *       committed), {@code duplicate} (found applied before, by its key), {@code dead-lettered}.
 *   <li>{@value #FAILURES} (counter): failed attempts of records.
 *   <li>{@value #FENCED} (counter): commits the store refused because a newer claim held the
 *       partition.
 *   <li>{@value #CLAIMS} (counter): partitions claimed in the store.
 *   <li>{@value #STORE_ERRORS} (counter): claims and batches whose outcome was an error or unknown.
 *   <li>{@value #RUNNING} (gauge): 1 while the receiver's loop runs, else 0.
 * </ul>
 */
public final class IdemKafkaReceiverMetrics implements MeterBinder {
  public static final String RECORDS = "idem.kafka.receiver.records";
  public static final String FAILURES = "idem.kafka.receiver.failures";
  public static final String FENCED = "idem.kafka.receiver.fenced";
  public static final String CLAIMS = "idem.kafka.receiver.claims";
  public static final String STORE_ERRORS = "idem.kafka.receiver.store.errors";
  public static final String RUNNING = "idem.kafka.receiver.running";

  private final IdemKafkaReceivers receivers;

  public IdemKafkaReceiverMetrics(IdemKafkaReceivers receivers) {
    this.receivers = Objects.requireNonNull(receivers, "receivers");
  }

  @Override
  public void bindTo(MeterRegistry registry) {
    for (String name : receivers.names()) {
      Tags tags =
          Tags.of(
              "receiver", name, "group", Objects.requireNonNull(receivers.receiver(name).group()));
      counter(registry, RECORDS, name, tags.and("outcome", "applied"), ReceiverStats::applied);
      counter(registry, RECORDS, name, tags.and("outcome", "duplicate"), ReceiverStats::duplicates);
      counter(
          registry,
          RECORDS,
          name,
          tags.and("outcome", "dead-lettered"),
          ReceiverStats::deadLettered);
      counter(registry, FAILURES, name, tags, ReceiverStats::failures);
      counter(registry, FENCED, name, tags, ReceiverStats::fenced);
      counter(registry, CLAIMS, name, tags, ReceiverStats::claims);
      counter(registry, STORE_ERRORS, name, tags, ReceiverStats::storeErrors);
      Gauge.builder(RUNNING, receivers, r -> r.isRunning(name) ? 1 : 0)
          .tags(tags)
          .description("1 while the receiver's loop runs")
          .register(registry);
    }
  }

  private void counter(
      MeterRegistry registry,
      String meter,
      String name,
      Tags tags,
      ToLongFunction<ReceiverStats> count) {
    FunctionCounter.builder(
            meter,
            receivers,
            r -> {
              ReceiverStats s = r.stats(name);
              return s == null ? 0 : count.applyAsLong(s);
            })
        .tags(tags)
        .register(registry);
  }
}
