package io.idem.kafka.spring;

import static org.assertj.core.api.Assertions.assertThat;

import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.kafka.spi.ReceiverStore;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.annotation.ImportCandidates;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The auto-configuration without a broker: receiver beans become running loops configured from
 * {@code spring.kafka.*} and {@code idem.kafka.*}, which stop with the context; bad configuration
 * fails the start with a message that says what to change. Nothing listens on {@link #NOWHERE}, so
 * no partition is ever assigned and the store is never called.
 */
class IdemKafkaAutoConfigurationTest {
  static final String NOWHERE = "127.0.0.1:1";

  final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(KafkaAutoConfiguration.class, IdemKafkaAutoConfiguration.class))
          .withPropertyValues("spring.kafka.bootstrap-servers=" + NOWHERE);

  /** A store no test may reach: without a broker, no partition is assigned. */
  static final class UnreachedStore implements ReceiverStore<String, String> {
    @Override
    public CompletionStage<PartitionClaim> claim(String group, TopicPartition partition) {
      throw new AssertionError("claimed " + partition + " without a broker");
    }

    @Override
    public CompletionStage<BatchOutcome> process(
        String group,
        TopicPartition partition,
        long epoch,
        List<ConsumerRecord<String, String>> records) {
      throw new AssertionError("processed " + partition + " without a broker");
    }

    @Override
    public CompletionStage<BatchOutcome> skip(
        String group, TopicPartition partition, long epoch, ConsumerRecord<String, String> r) {
      throw new AssertionError("skipped in " + partition + " without a broker");
    }
  }

  static IdemKafkaReceiver.Builder<String, String> receiver(String name) {
    return IdemKafkaReceiver.builder(
            name, new StringDeserializer(), new StringDeserializer(), new UnreachedStore())
        .topics(name);
  }

  @Configuration(proxyBeanMethods = false)
  static class Payments {
    @Bean
    IdemKafkaReceiver<String, String> payments() {
      return receiver("payments").build();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class PaymentsAndAudit {
    @Bean
    IdemKafkaReceiver<String, String> payments() {
      return receiver("payments").build();
    }

    @Bean
    IdemKafkaReceiver<String, String> audit() {
      return receiver("audit")
          .group("auditors")
          .maxAttempts(9)
          .pollTimeout(Duration.ofMillis(70))
          .consumerProperty("max.poll.records", 11)
          .build();
    }
  }

  static boolean loopThreadAlive(String name) {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(t -> t.getName().equals("idem-kafka-" + name) && t.isAlive());
  }

  @Test
  void aReceiverBeanRunsItsLoopWithBootsConsumerConfigurationAndStopsWithTheContext() {
    AtomicReference<IdemKafkaReceivers> seen = new AtomicReference<>();
    runner
        .withUserConfiguration(Payments.class)
        .withPropertyValues(
            "spring.kafka.consumer.group-id=billing", "spring.kafka.consumer.max-poll-records=7")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              IdemKafkaReceivers receivers = context.getBean(IdemKafkaReceivers.class);
              seen.set(receivers);
              assertThat(receivers.names()).containsExactly("payments");
              assertThat(receivers.isRunning()).isTrue();
              assertThat(receivers.isRunning("payments")).isTrue();
              assertThat(loopThreadAlive("payments")).isTrue();
              assertThat(receivers.stats("payments")).isNotNull();
              var config = receivers.consumerConfig("payments");
              assertThat(String.valueOf(config.get("bootstrap.servers"))).contains(NOWHERE);
              assertThat(config).containsEntry("group.id", "billing");
              assertThat(String.valueOf(config.get("max.poll.records"))).isEqualTo("7");
              assertThat(config).containsEntry("enable.auto.commit", false);
              assertThat(receivers.receiver("payments").group()).isEqualTo("billing");
            });
    IdemKafkaReceivers receivers = seen.get();
    assertThat(receivers.isRunning()).isFalse();
    assertThat(receivers.isRunning("payments")).isFalse();
    assertThat(loopThreadAlive("payments")).isFalse();
  }

  @Test
  void idemKafkaPropertiesFillWhatAReceiverLeavesUnsetAndItsOwnSettingsWin() {
    runner
        .withUserConfiguration(PaymentsAndAudit.class)
        .withPropertyValues(
            "spring.kafka.consumer.group-id=billing",
            "spring.kafka.consumer.max-poll-records=7",
            "idem.kafka.max-attempts=3",
            "idem.kafka.poll-timeout=50ms",
            "idem.kafka.store-timeout=2s",
            "idem.kafka.max-backoff=1s",
            "idem.kafka.auto-startup=false",
            "spring.kafka.client-id=shop")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              IdemKafkaReceivers receivers = context.getBean(IdemKafkaReceivers.class);
              assertThat(receivers.names()).containsExactly("payments", "audit");
              IdemKafkaReceiver<?, ?> payments = receivers.receiver("payments");
              assertThat(payments.group()).isEqualTo("billing");
              assertThat(payments.maxAttempts()).isEqualTo(3);
              assertThat(payments.pollTimeout()).isEqualTo(Duration.ofMillis(50));
              assertThat(payments.storeTimeout()).isEqualTo(Duration.ofSeconds(2));
              assertThat(payments.maxBackoff()).isEqualTo(Duration.ofSeconds(1));
              IdemKafkaReceiver<?, ?> audit = receivers.receiver("audit");
              assertThat(audit.group()).isEqualTo("auditors");
              assertThat(audit.maxAttempts()).isEqualTo(9);
              assertThat(audit.pollTimeout()).isEqualTo(Duration.ofMillis(70));
              assertThat(audit.storeTimeout()).isEqualTo(Duration.ofSeconds(2));
              assertThat(receivers.consumerConfig("audit")).containsEntry("group.id", "auditors");
              assertThat(receivers.consumerConfig("audit")).containsEntry("max.poll.records", 11);
              assertThat(receivers.consumerConfig("audit"))
                  .containsEntry("client.id", "shop-audit");
              assertThat(
                      String.valueOf(receivers.consumerConfig("payments").get("max.poll.records")))
                  .isEqualTo("7");
            });
  }

  @Test
  void withAutoStartupOffTheReceiversWaitForAStartAndCanStartAgainAfterAStop() {
    runner
        .withUserConfiguration(Payments.class)
        .withPropertyValues(
            "spring.kafka.consumer.group-id=billing", "idem.kafka.auto-startup=false")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              IdemKafkaReceivers receivers = context.getBean(IdemKafkaReceivers.class);
              assertThat(receivers.isRunning()).isFalse();
              assertThat(receivers.stats("payments")).isNull();
              assertThat(loopThreadAlive("payments")).isFalse();
              receivers.start();
              assertThat(receivers.isRunning("payments")).isTrue();
              receivers.stop();
              assertThat(receivers.isRunning("payments")).isFalse();
              assertThat(loopThreadAlive("payments")).isFalse();
              receivers.start();
              assertThat(receivers.isRunning("payments")).isTrue();
            });
    assertThat(loopThreadAlive("payments")).isFalse();
  }

  @Test
  void aReceiverWithoutAGroupFailsTheStartNamingItAndTheProperty() {
    runner
        .withUserConfiguration(Payments.class)
        .run(
            context ->
                assertThat(context)
                    .getFailure()
                    .rootCause()
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("receiver 'payments' has no consumer group")
                    .hasMessageContaining("spring.kafka.consumer.group-id"));
  }

  @Test
  void autoCommitFailsTheStartNamingTheProperty() {
    runner
        .withUserConfiguration(Payments.class)
        .withPropertyValues(
            "spring.kafka.consumer.group-id=billing",
            "spring.kafka.consumer.enable-auto-commit=true")
        .run(
            context ->
                assertThat(context)
                    .getFailure()
                    .rootCause()
                    .hasMessageContaining("receiver 'payments' has enable.auto.commit=true")
                    .hasMessageContaining("spring.kafka.consumer.enable-auto-commit"));
  }

  @Test
  void anIdemKafkaPropertyOutOfRangeFailsItsBinding() {
    runner
        .withUserConfiguration(Payments.class)
        .withPropertyValues("spring.kafka.consumer.group-id=billing", "idem.kafka.max-attempts=0")
        .run(
            context ->
                assertThat(context)
                    .getFailure()
                    .rootCause()
                    .hasMessageContaining("idem.kafka.max-attempts must be at least 1, got 0"));
  }

  @Test
  void aConsumerConfigurationKafkaRefusesFailsTheStartNamingTheReceiver() {
    runner
        .withUserConfiguration(Payments.class)
        .withPropertyValues(
            "spring.kafka.consumer.group-id=billing",
            "spring.kafka.bootstrap-servers=not a host and port")
        .run(
            context -> {
              assertThat(context)
                  .getFailure()
                  .hasStackTraceContaining(
                      "Idem Kafka receiver 'payments' could not make its Kafka consumer");
              assertThat(loopThreadAlive("payments")).isFalse();
            });
  }

  @Test
  void twoReceiversOfOneNameFailTheStart() {
    runner
        .withUserConfiguration(Payments.class)
        .withBean("again", IdemKafkaReceiver.class, () -> receiver("payments").build())
        .withPropertyValues("spring.kafka.consumer.group-id=billing")
        .run(
            context ->
                assertThat(context)
                    .getFailure()
                    .rootCause()
                    .hasMessageContaining("two Idem Kafka receivers are named 'payments'"));
  }

  @Test
  void withoutAConsumerFactoryTheErrorSaysWhereTheConfigurationComesFrom() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(IdemKafkaAutoConfiguration.class))
        .withUserConfiguration(Payments.class)
        .run(
            context ->
                assertThat(context)
                    .getFailure()
                    .rootCause()
                    .hasMessageContaining("[payments]")
                    .hasMessageContaining("ConsumerFactory bean"));
  }

  @Test
  void withoutReceiverBeansNothingIsMade() {
    runner.run(
        context -> {
          assertThat(context).hasNotFailed();
          assertThat(context).doesNotHaveBean(IdemKafkaReceivers.class);
          assertThat(context).doesNotHaveBean(IdemKafkaReceiverMetrics.class);
          assertThat(context).doesNotHaveBean(IdemKafkaProperties.class);
        });
  }

  @Test
  void theMetersFollowEachReceiver() {
    MeterRegistry registry = new SimpleMeterRegistry();
    runner
        .withUserConfiguration(Payments.class)
        .withPropertyValues("spring.kafka.consumer.group-id=billing")
        .run(
            context -> {
              context.getBean(IdemKafkaReceiverMetrics.class).bindTo(registry);
              assertThat(
                      registry
                          .get(IdemKafkaReceiverMetrics.RUNNING)
                          .tags("receiver", "payments", "group", "billing")
                          .gauge()
                          .value())
                  .isEqualTo(1.0);
              assertThat(
                      registry
                          .get(IdemKafkaReceiverMetrics.RECORDS)
                          .tags("receiver", "payments", "outcome", "applied")
                          .functionCounter()
                          .count())
                  .isZero();
              for (String meter :
                  List.of(
                      IdemKafkaReceiverMetrics.FAILURES,
                      IdemKafkaReceiverMetrics.FENCED,
                      IdemKafkaReceiverMetrics.CLAIMS,
                      IdemKafkaReceiverMetrics.STORE_ERRORS)) {
                assertThat(registry.get(meter).tags("receiver", "payments").functionCounter())
                    .isNotNull();
              }
              assertThat(registry.get(IdemKafkaReceiverMetrics.RECORDS).functionCounters())
                  .hasSize(3);

              // A loop that ends on an error (here an interrupt of its poll) reads 0 while the
              // lifecycle still runs.
              IdemKafkaReceivers receivers = context.getBean(IdemKafkaReceivers.class);
              Thread.getAllStackTraces().keySet().stream()
                  .filter(t -> t.getName().equals("idem-kafka-payments"))
                  .forEach(Thread::interrupt);
              long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
              while (receivers.isRunning("payments") && System.nanoTime() - end < 0) {
                Thread.sleep(20);
              }
              assertThat(receivers.isRunning("payments")).isFalse();
              assertThat(receivers.isRunning()).isTrue();
              assertThat(
                      registry
                          .get(IdemKafkaReceiverMetrics.RUNNING)
                          .tags("receiver", "payments")
                          .gauge()
                          .value())
                  .isZero();
            });
    assertThat(
            registry
                .get(IdemKafkaReceiverMetrics.RUNNING)
                .tags("receiver", "payments")
                .gauge()
                .value())
        .isZero();
  }

  @Test
  void springBootFindsTheAutoConfiguration() {
    assertThat(
            ImportCandidates.load(AutoConfiguration.class, getClass().getClassLoader())
                .getCandidates())
        .contains(IdemKafkaAutoConfiguration.class.getName());
  }
}
