package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * The server no longer knows the session (it expired, was closed, or never existed), so the calls
 * that were in flight have unknown outcomes: each was applied at most once and will not be resent.
 * The client is not closed: it registers a new session for new calls by itself.
 */
public final class SessionExpiredException extends SessionLostException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public SessionExpiredException(
      String message, long sessionId, long requestNumber, @Nullable Throwable cause) {
    super(message, sessionId, requestNumber, "", cause);
  }

  @Override
  public boolean isFatal() {
    return false;
  }
}
