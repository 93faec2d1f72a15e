package io.idem.client;

import io.idem.proto.Operation;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import java.util.Locale;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/** The client's meters on a Micrometer registry ({@link IdemClient.Builder#meterRegistry}). */
final class MicrometerObserver implements CallObserver {
  private final MeterRegistry registry;
  private final String client;
  private final AtomicInteger inFlight = new AtomicInteger();
  private final ConcurrentMap<String, Timer> timers = new ConcurrentHashMap<>();

  private MicrometerObserver(MeterRegistry registry, String client) {
    this.registry = registry;
    this.client = client;
  }

  /** Registers the client's meters, tagged {@code client}, reading {@code driver}'s counts. */
  static MicrometerObserver register(MeterRegistry registry, String client, GroupSessions driver) {
    MicrometerObserver o = new MicrometerObserver(registry, client);
    Gauge.builder("idem.client.in.flight", o.inFlight, AtomicInteger::get)
        .description("Calls made and not yet answered")
        .tag("client", client)
        .register(registry);
    FunctionCounter.builder("idem.client.retries", driver, GroupSessions::retries)
        .description("Reconnects and registration retries")
        .tag("client", client)
        .register(registry);
    FunctionCounter.builder("idem.client.duplicates.seen", driver, GroupSessions::duplicates)
        .description("Answers the server gave from its saved responses (a resent request)")
        .tag("client", client)
        .register(registry);
    return o;
  }

  @Override
  public long started() {
    inFlight.incrementAndGet();
    return System.nanoTime();
  }

  @Override
  public void finished(Operation.OpCase op, Throwable failure, long started) {
    long nanos = System.nanoTime() - started;
    inFlight.decrementAndGet();
    String kind = op.name().toLowerCase(Locale.ROOT);
    String outcome = outcome(failure);
    timers
        .computeIfAbsent(
            kind + ' ' + outcome,
            k ->
                Timer.builder("idem.client.requests")
                    .description("Calls from submission to answer, by operation and outcome")
                    .tags("client", client, "op", kind, "outcome", outcome)
                    .publishPercentileHistogram()
                    .register(registry))
        .record(nanos, TimeUnit.NANOSECONDS);
  }

  private static String outcome(Throwable failure) {
    Throwable t =
        failure instanceof CompletionException && failure.getCause() != null
            ? failure.getCause()
            : failure;
    if (t == null) {
      return "ok";
    }
    if (t instanceof RejectedException) {
      return "rejected";
    }
    if (t instanceof NotSentException) {
      return "not_sent";
    }
    if (t instanceof OutcomeUnknownException) {
      return "outcome_unknown";
    }
    if (t instanceof SessionLostException) {
      return "session_lost";
    }
    return "error";
  }
}
