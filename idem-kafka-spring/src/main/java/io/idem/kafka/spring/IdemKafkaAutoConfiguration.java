package io.idem.kafka.spring;

import io.idem.kafka.ExactlyOnceConsumer;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.List;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.ConsumerFactory;

/**
 * Runs the application's {@link IdemKafkaReceiver} beans ({@link IdemKafkaReceivers}) with the
 * consumer configuration of its {@link ConsumerFactory} (Spring Boot's, from {@code
 * spring.kafka.*}, unless the application made its own), and publishes their counts as meters when
 * Micrometer is on the class path. Nothing happens without a receiver bean.
 */
@AutoConfiguration(after = KafkaAutoConfiguration.class)
@ConditionalOnClass({ExactlyOnceConsumer.class, ConsumerFactory.class})
@ConditionalOnBean(IdemKafkaReceiver.class)
@EnableConfigurationProperties(IdemKafkaProperties.class)
public class IdemKafkaAutoConfiguration {

  @Bean
  @ConditionalOnMissingBean
  IdemKafkaReceivers idemKafkaReceivers(
      ObjectProvider<IdemKafkaReceiver<?, ?>> receivers,
      ObjectProvider<ConsumerFactory<?, ?>> consumerFactory,
      IdemKafkaProperties properties) {
    List<IdemKafkaReceiver<?, ?>> all = receivers.orderedStream().toList();
    ConsumerFactory<?, ?> factory = consumerFactory.getIfUnique();
    if (factory == null) {
      throw new IllegalStateException(
          "the Idem Kafka receivers "
              + all.stream().map(IdemKafkaReceiver::name).toList()
              + " take their consumer configuration from the application's ConsumerFactory bean"
              + " (Spring Boot's Kafka auto-configuration makes one from spring.kafka.*): there is"
              + " none, or more than one");
    }
    return new IdemKafkaReceivers(all, factory.getConfigurationProperties(), properties);
  }

  /** The receivers' meters, bound by Spring Boot's metrics to the application's registries. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(MeterBinder.class)
  static class Metrics {
    @Bean
    @ConditionalOnMissingBean
    IdemKafkaReceiverMetrics idemKafkaReceiverMetrics(IdemKafkaReceivers receivers) {
      return new IdemKafkaReceiverMetrics(receivers);
    }
  }
}
