package io.idem.server;

import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.ratis.metrics.LongCounter;
import org.apache.ratis.metrics.MetricRegistries;
import org.apache.ratis.metrics.MetricRegistryInfo;
import org.apache.ratis.metrics.RatisMetricRegistry;
import org.apache.ratis.metrics.Timekeeper;
import org.apache.ratis.util.TimeDuration;

/**
 * Apache Ratis's own metrics, kept lean. Ratis finds its metrics implementation through the {@link
 * MetricRegistries} service (this class, named in {@code META-INF/services}). The implementation
 * Ratis ships, {@code ratis-metrics-default}, times with Dropwizard timers whose exponentially
 * decaying reservoir puts every sample into a {@code ConcurrentSkipListMap}: 5-6% of each server's
 * CPU samples under the keys workload, on every append, flush and reply (docs/PERFORMANCE.md,
 * "Ratis's metrics lean, its retry cache short").
 *
 * <p>Idem reads none of those histograms: its own metrics are in {@link ServerMetrics}, on the
 * admin port. So a timer here keeps a count and a total ({@link LongAdder}s), a counter a {@link
 * LongAdder} ({@link LongCounter#getCount} answers what Dropwizard's would), and a gauge its
 * supplier. A gauge registered again under the same name replaces the first (Dropwizard keeps the
 * first): the newer supplier is the one whose component is alive. Reporters registered with {@link
 * #addReporterRegistration} see every registry created or removed, as with the default; there is no
 * JMX or console reporter.
 */
public final class RatisMetricRegistries extends MetricRegistries {
  private final Map<MetricRegistryInfo, Registry> registries = new ConcurrentHashMap<>();
  private final List<Consumer<RatisMetricRegistry>> onCreate = new CopyOnWriteArrayList<>();
  private final List<Consumer<RatisMetricRegistry>> onRemove = new CopyOnWriteArrayList<>();

  /** Called by Ratis's service loader. */
  public RatisMetricRegistries() {}

  @Override
  public void clear() {
    for (MetricRegistryInfo info : Set.copyOf(registries.keySet())) {
      remove(info);
    }
  }

  @Override
  public RatisMetricRegistry create(MetricRegistryInfo info) {
    Registry[] created = new Registry[1];
    Registry registry =
        registries.computeIfAbsent(
            info,
            i -> {
              created[0] = new Registry(i);
              return created[0];
            });
    if (created[0] != null) {
      onCreate.forEach(reporter -> reporter.accept(registry));
    }
    return registry;
  }

  @Override
  public boolean remove(MetricRegistryInfo info) {
    Registry removed = registries.remove(info);
    if (removed == null) {
      return false;
    }
    onRemove.forEach(stop -> stop.accept(removed));
    return true;
  }

  @Override
  public Optional<RatisMetricRegistry> get(MetricRegistryInfo info) {
    return Optional.ofNullable(registries.get(info));
  }

  @Override
  public Set<MetricRegistryInfo> getMetricRegistryInfos() {
    return Set.copyOf(registries.keySet());
  }

  @Override
  public Collection<RatisMetricRegistry> getMetricRegistries() {
    return List.copyOf(registries.values());
  }

  @Override
  public void addReporterRegistration(
      Consumer<RatisMetricRegistry> reporter, Consumer<RatisMetricRegistry> stopReporter) {
    onCreate.add(reporter);
    onRemove.add(stopReporter);
  }

  @Override
  public void removeReporterRegistration(
      Consumer<RatisMetricRegistry> reporter, Consumer<RatisMetricRegistry> stopReporter) {
    onCreate.remove(reporter);
    onRemove.remove(stopReporter);
  }

  @Override
  public void enableJmxReporter() {
    throw new UnsupportedOperationException(
        "Idem's lean Ratis metrics have no JMX reporter: Idem's metrics are on the admin port"
            + " (/metrics)");
  }

  @Override
  public void enableConsoleReporter(TimeDuration consoleReportRate) {
    throw new UnsupportedOperationException(
        "Idem's lean Ratis metrics have no console reporter: Idem's metrics are on the admin"
            + " port (/metrics)");
  }

  /** One component's metrics (a log worker, a leader's appenders, a server). */
  static final class Registry implements RatisMetricRegistry {
    private final MetricRegistryInfo info;
    private final Map<String, Object> metrics = new ConcurrentHashMap<>();

    Registry(MetricRegistryInfo info) {
      this.info = info;
    }

    @Override
    public Timekeeper timer(String name) {
      return metric(name, Timer.class, Timer::new);
    }

    @Override
    public LongCounter counter(String name) {
      return metric(name, Counter.class, Counter::new);
    }

    @Override
    public boolean remove(String name) {
      return metrics.remove(name) != null;
    }

    @Override
    public <T> void gauge(String name, Supplier<Supplier<T>> gaugeSupplier) {
      metrics.put(name, new Gauge(gaugeSupplier.get()));
    }

    @Override
    public MetricRegistryInfo getMetricRegistryInfo() {
      return info;
    }

    /** The metric of that name, or null: a {@link Timer}, a {@link Counter} or a {@link Gauge}. */
    Object metric(String name) {
      return metrics.get(name);
    }

    private <M> M metric(String name, Class<M> type, Supplier<M> make) {
      Object m = metrics.computeIfAbsent(name, n -> make.get());
      if (!type.isInstance(m)) {
        throw new IllegalArgumentException(
            "Ratis metric " + name + " of " + info + " is a " + m.getClass().getSimpleName());
      }
      return type.cast(m);
    }
  }

  /** How many times something was timed and how long it took in total. */
  static final class Timer implements Timekeeper {
    private final LongAdder count = new LongAdder();
    private final LongAdder nanos = new LongAdder();

    @Override
    public Context time() {
      long start = System.nanoTime();
      return () -> {
        long elapsed = System.nanoTime() - start;
        count.increment();
        nanos.add(elapsed);
        return elapsed;
      };
    }

    long count() {
      return count.sum();
    }

    long totalNanos() {
      return nanos.sum();
    }
  }

  static final class Counter implements LongCounter {
    private final LongAdder value = new LongAdder();

    @Override
    public void inc(long n) {
      value.add(n);
    }

    @Override
    public void dec(long n) {
      value.add(-n);
    }

    @Override
    public long getCount() {
      return value.sum();
    }
  }

  /** A value read when asked. */
  record Gauge(Supplier<?> value) {}
}
