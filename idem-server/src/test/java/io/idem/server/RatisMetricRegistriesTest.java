package io.idem.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.server.RatisMetricRegistries.Counter;
import io.idem.server.RatisMetricRegistries.Gauge;
import io.idem.server.RatisMetricRegistries.Timer;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.apache.ratis.metrics.MetricRegistries;
import org.apache.ratis.metrics.MetricRegistryInfo;
import org.apache.ratis.metrics.RatisMetricRegistry;
import org.apache.ratis.metrics.Timekeeper;
import org.apache.ratis.protocol.RaftGroupId;
import org.apache.ratis.protocol.RaftGroupMemberId;
import org.apache.ratis.protocol.RaftPeerId;
import org.apache.ratis.server.metrics.SegmentedRaftLogMetrics;
import org.apache.ratis.util.TimeDuration;
import org.junit.jupiter.api.Test;

class RatisMetricRegistriesTest {
  static MetricRegistryInfo info(String prefix) {
    return new MetricRegistryInfo(prefix, "ratis", "test", "a test registry");
  }

  @Test
  void ratisLoadsTheLeanRegistriesAndItsOwnMetricsWorkOnThem() {
    assertThat(MetricRegistries.global()).isInstanceOf(RatisMetricRegistries.class);
    // With a second provider (ratis-metrics-default back on the classpath) Ratis would take
    // whichever the class path lists first.
    assertThat(
            ServiceLoader.load(MetricRegistries.class).stream().map(ServiceLoader.Provider::type))
        .containsExactly(RatisMetricRegistries.class);

    RaftGroupMemberId member =
        RaftGroupMemberId.valueOf(RaftPeerId.valueOf("n9"), RaftGroupId.randomId());
    SegmentedRaftLogMetrics metrics = new SegmentedRaftLogMetrics(member);
    try {
      metrics.onRaftLogCacheHit();
      metrics.onRaftLogCacheHit();
      metrics.onRaftLogFlush();
      try (var t = metrics.startFlushTimer()) {
        assertThat(t).isNotNull();
      }
      metrics.addFlushBatchSizeGauge(() -> 7);

      RatisMetricRegistries.Registry registry =
          (RatisMetricRegistries.Registry) metrics.getRegistry();
      assertThat(MetricRegistries.global().get(registry.getMetricRegistryInfo()))
          .containsSame(registry);
      assertThat(
              metric(registry, SegmentedRaftLogMetrics.RAFT_LOG_CACHE_HIT_COUNT, Counter.class)
                  .getCount())
          .isEqualTo(2);
      assertThat(
              metric(registry, SegmentedRaftLogMetrics.RAFT_LOG_FLUSH_COUNT, Counter.class)
                  .getCount())
          .isEqualTo(1);
      assertThat(metric(registry, SegmentedRaftLogMetrics.RAFT_LOG_FLUSH_TIME, Timer.class).count())
          .isEqualTo(1);
      assertThat(
              metric(registry, SegmentedRaftLogMetrics.RAFT_LOG_SYNC_BATCH_SIZE, Gauge.class)
                  .value()
                  .get())
          .isEqualTo(7);
    } finally {
      metrics.unregister();
    }
    assertThat(MetricRegistries.global().get(metrics.getRegistry().getMetricRegistryInfo()))
        .isEmpty();
  }

  /** The metric of that name in {@code r}, of that type (a failed assertion if absent or other). */
  static <M> M metric(RatisMetricRegistries.Registry r, String name, Class<M> type) {
    assertThat(r.metric(name)).as(name).isInstanceOf(type);
    return type.cast(r.metric(name));
  }

  @Test
  void aTimerCountsAndSumsWhatItTimed() throws Exception {
    RatisMetricRegistries.Timer timer = new RatisMetricRegistries.Timer();
    Timekeeper.Context first = timer.time();
    Thread.sleep(2);
    long elapsed = first.stop();
    try (var second = Timekeeper.start(timer)) {
      assertThat(second).isNotNull();
    }
    assertThat(elapsed).isGreaterThanOrEqualTo(2_000_000L);
    assertThat(timer.count()).isEqualTo(2);
    assertThat(timer.totalNanos()).isGreaterThanOrEqualTo(elapsed);
  }

  @Test
  void countersGoUpAndDown() {
    RatisMetricRegistries.Counter c = new RatisMetricRegistries.Counter();
    c.inc();
    c.inc(5);
    c.dec(2);
    c.dec();
    assertThat(c.getCount()).isEqualTo(3);
  }

  @Test
  void aRegistryIsCreatedOnceAndReportersSeeItComeAndGo() {
    RatisMetricRegistries registries = new RatisMetricRegistries();
    List<String> events = new ArrayList<>();
    Consumer<RatisMetricRegistry> start =
        r -> events.add("start " + r.getMetricRegistryInfo().getPrefix());
    Consumer<RatisMetricRegistry> stop =
        r -> events.add("stop " + r.getMetricRegistryInfo().getPrefix());
    registries.addReporterRegistration(start, stop);

    RatisMetricRegistry a = registries.create(info("a"));
    assertThat(registries.create(info("a"))).isSameAs(a);
    registries.create(info("b"));
    assertThat(registries.getMetricRegistryInfos()).containsExactlyInAnyOrder(info("a"), info("b"));
    assertThat(registries.getMetricRegistries()).hasSize(2).contains(a);

    assertThat(registries.remove(info("a"))).isTrue();
    assertThat(registries.remove(info("a"))).isFalse();
    assertThat(registries.get(info("a"))).isEmpty();
    registries.removeReporterRegistration(start, stop);
    registries.clear();
    assertThat(registries.getMetricRegistries()).isEmpty();
    assertThat(events).containsExactly("start a", "start b", "stop a");
  }

  @Test
  void aNameHoldsOneKindOfMetricAndRemoveForgetsIt() {
    RatisMetricRegistry r = new RatisMetricRegistries().create(info("x"));
    assertThat(r.timer("t")).isSameAs(r.timer("t"));
    assertThat(r.counter("c")).isSameAs(r.counter("c"));
    assertThatThrownBy(() -> r.counter("t"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Ratis metric t")
        .hasMessageContaining("is a Timer");
    assertThat(r.remove("t")).isTrue();
    assertThat(r.remove("t")).isFalse();
    r.counter("t").inc();
    assertThat(r.counter("t").getCount()).isEqualTo(1);

    AtomicInteger reads = new AtomicInteger();
    r.gauge("g", () -> reads::incrementAndGet);
    RatisMetricRegistries.Gauge g = metric((RatisMetricRegistries.Registry) r, "g", Gauge.class);
    assertThat(g.value().get()).isEqualTo(1);
    assertThat(g.value().get()).isEqualTo(2);
  }

  @Test
  void jmxAndConsoleReportersAreRefusedWithAReason() {
    RatisMetricRegistries registries = new RatisMetricRegistries();
    assertThatThrownBy(registries::enableJmxReporter)
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("/metrics");
    assertThatThrownBy(() -> registries.enableConsoleReporter(TimeDuration.ONE_SECOND))
        .isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("/metrics");
  }
}
