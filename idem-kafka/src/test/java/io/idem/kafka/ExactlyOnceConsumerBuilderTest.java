package io.idem.kafka;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.idem.kafka.spi.BatchOutcome;
import io.idem.kafka.spi.PartitionClaim;
import io.idem.kafka.spi.ReceiverStore;
import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import javax.management.ObjectName;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;

/**
 * What the builder refuses, and that a consumer closed before its loop ran closes its Kafka
 * consumer (no broker: these never poll).
 */
class ExactlyOnceConsumerBuilderTest {

  /** A store these tests never reach: they build and close consumers that never poll. */
  private static final ReceiverStore<String, String> UNREACHED =
      new ReceiverStore<>() {
        @Override
        public CompletionStage<PartitionClaim> claim(String group, TopicPartition partition) {
          throw new AssertionError("not reached");
        }

        @Override
        public CompletionStage<BatchOutcome> process(
            String group,
            TopicPartition partition,
            long epoch,
            List<ConsumerRecord<String, String>> records) {
          throw new AssertionError("not reached");
        }

        @Override
        public CompletionStage<BatchOutcome> skip(
            String group, TopicPartition partition, long epoch, ConsumerRecord<String, String> r) {
          throw new AssertionError("not reached");
        }
      };

  private static Map<String, Object> config(String clientId) {
    Map<String, Object> c = new HashMap<>();
    c.put("bootstrap.servers", "127.0.0.1:1");
    c.put("group.id", "g");
    c.put("client.id", clientId);
    return c;
  }

  private static ExactlyOnceConsumer.Builder<String, String> builder(Map<String, Object> c) {
    return ExactlyOnceConsumer.builder(
        c, new StringDeserializer(), new StringDeserializer(), UNREACHED);
  }

  @Test
  void theBuilderRefusesAConfigurationThatWouldLoseTheGuarantee() {
    Map<String, Object> noGroup = config("a");
    noGroup.remove("group.id");
    assertThatThrownBy(() -> builder(noGroup))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("group.id");
    Map<String, Object> autoCommit = config("b");
    autoCommit.put("enable.auto.commit", "true");
    assertThatThrownBy(() -> builder(autoCommit))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("enable.auto.commit must be false");
    assertThatThrownBy(() -> builder(config("c")).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no topics");
    assertThatThrownBy(() -> builder(config("d")).maxAttempts(0))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aConsumerClosedBeforeItsLoopRanClosesItsKafkaConsumer() throws Exception {
    ObjectName appInfo = new ObjectName("kafka.consumer:type=app-info,id=never-ran");
    ExactlyOnceConsumer<String, String> c =
        builder(config("never-ran")).topics(List.of("t")).build();
    assertThat(ManagementFactory.getPlatformMBeanServer().isRegistered(appInfo)).isTrue();
    c.close();
    assertThat(ManagementFactory.getPlatformMBeanServer().isRegistered(appInfo)).isFalse();
    c.run(); // closed before it ran: returns at once
  }
}
