package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * The call never reached a server, so nothing was applied: retrying it is safe. {@link #reason()}
 * says why. When the client itself has ended, {@link #getCause()} is the exception that ended it.
 */
public final class NotSentException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** Why a call was not sent. */
  public enum Reason {
    /** Its deadline passed before the client had a session and a connection to send it on. */
    DEADLINE,
    /** The client was closed, or closed itself after a fatal error (the cause), before sending. */
    CLIENT_CLOSED,
    /** A read found no server to answer it within its deadline (reads change nothing). */
    UNAVAILABLE
  }

  private final Reason reason;

  /** For the client and its tests; applications only catch it. */
  public NotSentException(
      Reason reason,
      @Nullable String message,
      long sessionId,
      @Nullable String leaderHint,
      @Nullable Throwable cause) {
    super(message, sessionId, 0, leaderHint, cause);
    this.reason = reason;
  }

  /** Why the call was not sent. */
  public Reason reason() {
    return reason;
  }
}
