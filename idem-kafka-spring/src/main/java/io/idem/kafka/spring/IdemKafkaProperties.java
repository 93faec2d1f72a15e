package io.idem.kafka.spring;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * {@code idem.kafka.*}: how the application's {@link IdemKafkaReceiver}s run, where a receiver does
 * not say otherwise. The connection and the rest of the consumer configuration are Spring Boot's
 * {@code spring.kafka.*}. The defaults are {@code ExactlyOnceConsumer}'s own.
 */
@ConfigurationProperties("idem.kafka")
public class IdemKafkaProperties {
  /** The default of {@link #getMaxAttempts()}. */
  public static final int DEFAULT_MAX_ATTEMPTS = 5;

  /** The default of {@link #getPollTimeout()}. */
  public static final Duration DEFAULT_POLL_TIMEOUT = Duration.ofMillis(200);

  /** The default of {@link #getStoreTimeout()}. */
  public static final Duration DEFAULT_STORE_TIMEOUT = Duration.ofSeconds(30);

  /** The default of {@link #getMaxBackoff()}. */
  public static final Duration DEFAULT_MAX_BACKOFF = Duration.ofSeconds(5);

  /** Whether the receivers start with the application context. */
  private boolean autoStartup = true;

  /** How many failures of a record before it goes to the receiver's dead letters. */
  private int maxAttempts = DEFAULT_MAX_ATTEMPTS;

  /** How long one poll waits for records. */
  private Duration pollTimeout = DEFAULT_POLL_TIMEOUT;

  /**
   * How long the loop waits for the store's answer to a claim or a batch; keep it well under {@code
   * max.poll.interval.ms}.
   */
  private Duration storeTimeout = DEFAULT_STORE_TIMEOUT;

  /** The longest backoff before a failed record or claim is retried. */
  private Duration maxBackoff = DEFAULT_MAX_BACKOFF;

  public boolean isAutoStartup() {
    return autoStartup;
  }

  public void setAutoStartup(boolean autoStartup) {
    this.autoStartup = autoStartup;
  }

  public int getMaxAttempts() {
    return maxAttempts;
  }

  public void setMaxAttempts(int maxAttempts) {
    this.maxAttempts = atLeastOne("idem.kafka.max-attempts", maxAttempts);
  }

  public Duration getPollTimeout() {
    return pollTimeout;
  }

  public void setPollTimeout(Duration pollTimeout) {
    this.pollTimeout = positive("idem.kafka.poll-timeout", pollTimeout);
  }

  public Duration getStoreTimeout() {
    return storeTimeout;
  }

  public void setStoreTimeout(Duration storeTimeout) {
    this.storeTimeout = positive("idem.kafka.store-timeout", storeTimeout);
  }

  public Duration getMaxBackoff() {
    return maxBackoff;
  }

  public void setMaxBackoff(Duration maxBackoff) {
    this.maxBackoff = positive("idem.kafka.max-backoff", maxBackoff);
  }

  static int atLeastOne(String what, int n) {
    if (n < 1) {
      throw new IllegalArgumentException(what + " must be at least 1, got " + n);
    }
    return n;
  }

  static Duration positive(String what, Duration d) {
    if (d == null || d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException(what + " must be positive, got " + d);
    }
    return d;
  }
}
