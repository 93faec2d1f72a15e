package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * The session ended with the call in flight. The call was applied at most once and will not be
 * resent. {@link #isFatal()} says whether the client goes on: after {@link SessionExpiredException}
 * it registers a new session for new calls by itself; after the others it is closed.
 */
public abstract sealed class SessionLostException extends IdemException
    permits SessionExpiredException,
        FencedException,
        UnauthenticatedException,
        ClientClosedException,
        IdentityFileException {
  private static final long serialVersionUID = 1L;

  SessionLostException(
      String message,
      long sessionId,
      long requestNumber,
      String leaderHint,
      @Nullable Throwable cause) {
    super(message, sessionId, requestNumber, leaderHint, cause);
  }

  /** Whether the client is closed: new calls on it fail at once. */
  public abstract boolean isFatal();
}
