/**
 * The Kafka receiver in a Spring Boot application: each {@link
 * io.idem.kafka.spring.IdemKafkaReceiver} bean runs as an {@link io.idem.kafka.ExactlyOnceConsumer}
 * loop ({@link io.idem.kafka.spring.IdemKafkaReceivers}) that starts and stops with the context,
 * configured from {@code spring.kafka.*} and {@code idem.kafka.*}.
 *
 * <p>A receiver is a bean, not a {@code @KafkaListener} method, because the record's handler
 * belongs to the store (it returns an Idem {@code Write}, or writes on the store's PostgreSQL
 * connection) and because the loop's work between polls has no place in a listener container: the
 * claim and seek of each assigned partition, the retry of a failed claim, the resume of a partition
 * paused for a backoff, and the commit of Kafka's offsets after the store's. A container calls its
 * listener only when a poll returns records, resumes partitions that its own bookkeeping did not
 * pause when the container resumes, and commits offsets itself unless told not to; the receiver
 * runs the one loop that keeps the guarantees instead of a second copy of it.
 */
@NullMarked
package io.idem.kafka.spring;

import org.jspecify.annotations.NullMarked;
