package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * The identity file could not be read or written, so the client can no longer promise exactly-once
 * across a restart. The client is closed; the cause is the I/O error.
 */
public final class IdentityFileException extends SessionLostException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public IdentityFileException(
      String message, long sessionId, long requestNumber, @Nullable Throwable cause) {
    super(message, sessionId, requestNumber, "", cause);
  }

  @Override
  public boolean isFatal() {
    return true;
  }
}
