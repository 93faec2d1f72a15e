package io.idem.client;

/**
 * Malformed input or input over one of the cluster's limits (key, value, lease name, lease TTL).
 * Checked by the client before a call is numbered where it can, and by the server otherwise, which
 * then saves the answer.
 */
public final class InvalidArgumentException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public InvalidArgumentException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
