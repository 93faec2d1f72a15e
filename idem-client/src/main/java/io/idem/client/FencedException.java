package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * A newer instance of this client (same identity) resumed the session, which fences this one. The
 * client is closed.
 */
public final class FencedException extends SessionLostException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public FencedException(
      String message, long sessionId, long requestNumber, @Nullable Throwable cause) {
    super(message, sessionId, requestNumber, "", cause);
  }

  @Override
  public boolean isFatal() {
    return true;
  }
}
