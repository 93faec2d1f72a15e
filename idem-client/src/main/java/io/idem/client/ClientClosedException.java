package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * The client was closed (by {@link IdemClient#close} or after a fatal error, the cause) with the
 * call in flight.
 */
public final class ClientClosedException extends SessionLostException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public ClientClosedException(
      String message, long sessionId, long requestNumber, @Nullable Throwable cause) {
    super(message, sessionId, requestNumber, "", cause);
  }

  @Override
  public boolean isFatal() {
    return true;
  }
}
