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
 * @param quotas every principal's default quotas, by name ({@code sessions}, {@code saved_bytes},
 *     {@code key_records}, {@code key_bytes}, {@code kv_keys}, {@code kv_bytes}, {@code leases},
 *     {@code list_length}), unless a role it holds sets one; empty from servers before quotas
 * @param backendBytes the backend budget: past this estimated size of the replicated state, writes
 *     that grow it are refused with {@code NO_SPACE} (0 from servers before quotas)
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
    long revision,
    java.util.Map<String, Long> quotas,
    long backendBytes) {

  /** Copies {@code quotas}, keeping its order. */
  public ClusterConfig {
    quotas = java.util.Collections.unmodifiableMap(new java.util.LinkedHashMap<>(quotas));
  }

  /** The quotas of {@code q} by name, in the message's field order; empty if none is set. */
  static java.util.Map<String, Long> quotas(io.idem.proto.Quotas q) {
    java.util.Map<String, Long> m = new java.util.LinkedHashMap<>();
    if (q.getSessions() == 0) {
      return m; // a server before quotas: every field is 0
    }
    m.put("sessions", q.getSessions());
    m.put("saved_bytes", q.getSavedBytes());
    m.put("key_records", q.getKeyRecords());
    m.put("key_bytes", q.getKeyBytes());
    m.put("kv_keys", q.getKvKeys());
    m.put("kv_bytes", q.getKvBytes());
    m.put("leases", q.getLeases());
    m.put("list_length", q.getListLength());
    return m;
  }
}
