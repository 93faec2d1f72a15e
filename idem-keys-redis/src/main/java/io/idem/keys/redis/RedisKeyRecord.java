package io.idem.keys.redis;

import java.util.Arrays;

/**
 * A key's record as the Redis store holds it ({@link RedisKeyStore#show}): for operators and tests,
 * since the record itself is a packed string (docs/KEYS.md, "Records"). Times are the Redis
 * server's, in milliseconds since the epoch.
 *
 * @param completed whether the key is completed (else in progress, owned by {@code token})
 * @param token the fencing token of the owner that acquired the key
 * @param deadlineMs the owner's deadline; past it, an acquire takes the key over
 * @param retentionMs how long the record is kept after its deadline, or after its completion
 * @param completedAtMs when it was completed; 0 while in progress
 * @param fingerprint the payload's fingerprint the key was acquired with (empty: none)
 * @param response the stored response; empty while in progress
 */
public record RedisKeyRecord(
    boolean completed,
    long token,
    long deadlineMs,
    long retentionMs,
    long completedAtMs,
    byte[] fingerprint,
    byte[] response) {

  public RedisKeyRecord {
    fingerprint = fingerprint.clone();
    response = response.clone();
  }

  @Override
  public byte[] fingerprint() {
    return fingerprint.clone();
  }

  @Override
  public byte[] response() {
    return response.clone();
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof RedisKeyRecord r
        && completed == r.completed
        && token == r.token
        && deadlineMs == r.deadlineMs
        && retentionMs == r.retentionMs
        && completedAtMs == r.completedAtMs
        && Arrays.equals(fingerprint, r.fingerprint)
        && Arrays.equals(response, r.response);
  }

  @Override
  public int hashCode() {
    return 31 * Long.hashCode(token) + Arrays.hashCode(response);
  }

  @Override
  public String toString() {
    return (completed ? "completed" : "in progress")
        + " token "
        + token
        + ", deadline "
        + deadlineMs
        + ", retention "
        + retentionMs
        + " ms"
        + (completed
            ? ", completed at " + completedAtMs + ", response " + response.length + " bytes"
            : "");
  }
}
