package io.idem.client;

import org.jspecify.annotations.Nullable;

/** The server refused the session's secret. The client is closed. */
public final class UnauthenticatedException extends SessionLostException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public UnauthenticatedException(
      String message, long sessionId, long requestNumber, @Nullable Throwable cause) {
    super(message, sessionId, requestNumber, "", cause);
  }

  @Override
  public boolean isFatal() {
    return true;
  }
}
