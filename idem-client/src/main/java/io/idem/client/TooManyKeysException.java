package io.idem.client;

/**
 * An acquire of a new idempotency key was refused because the cluster's key table is at its
 * capacity ({@code TOO_MANY_KEYS}): nothing changed. Retry later, once records expire, or shorten
 * the retention of the keys you acquire.
 */
public final class TooManyKeysException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public TooManyKeysException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
