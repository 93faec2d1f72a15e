package io.idem.core;

/**
 * A read-only copy of one session's state, for status pages, tests and the server's replies.
 *
 * @param clientId the session's id (the log index of its registration)
 * @param epoch the current epoch; bumped by every resume
 * @param name the durable name, or {@code null} for an anonymous session
 * @param ttlMs how long the session lives without activity, in log milliseconds
 * @param lastActiveMs log time of the last registration, resume, keep-alive or new command
 * @param nextSeq the lowest request number not applied yet
 * @param lowWater every number below it has been acknowledged by the client
 * @param savedResponses how many responses the table keeps for this session ({@code nextSeq -
 *     lowWater})
 */
public record SessionInfo(
    long clientId,
    long epoch,
    String name,
    long ttlMs,
    long lastActiveMs,
    long nextSeq,
    long lowWater,
    int savedResponses) {

  /** The log time after which the session expires: it lives while {@code now <= expiresAfter}. */
  public long expiresAfterMs() {
    return lastActiveMs + ttlMs;
  }
}
