package io.idem.client;

/**
 * The cluster's replicated configuration: the limits every replica judges requests by and the
 * bounds of its session table. It is changed only through the log, so every server that applied the
 * same entries reports the same one. Reported by {@link ClusterStatus#config()}.
 *
 * @param maxKeyBytes the largest key, in UTF-8 bytes
 * @param maxValueBytes the largest value, in bytes
 * @param maxLeaseNameChars the longest lease name, in characters
 * @param maxLeaseTtlMs the longest lease TTL, in milliseconds
 * @param window the most unacknowledged answers a session may hold
 * @param maxSessions the most live sessions; a registration beyond it is refused
 * @param maxSessionTtlMs the longest session TTL a client may ask for, in milliseconds
 * @param maxSessionNameChars the longest durable session name, in characters
 * @param revision the log index of the entry that set this configuration; 0 if none was applied yet
 *     and the defaults apply
 */
public record ClusterConfig(
    int maxKeyBytes,
    int maxValueBytes,
    int maxLeaseNameChars,
    long maxLeaseTtlMs,
    int window,
    int maxSessions,
    long maxSessionTtlMs,
    int maxSessionNameChars,
    long revision) {}
