package io.idem.client;

/**
 * The lease is gone (expired or revoked) or is held by another session: {@code LEASE_NOT_FOUND}.
 */
public final class LeaseNotFoundException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public LeaseNotFoundException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
