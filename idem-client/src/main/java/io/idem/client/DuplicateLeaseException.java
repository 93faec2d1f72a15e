package io.idem.client;

/** The lease is held by another session: {@code DUPLICATE_LEASE}. */
public final class DuplicateLeaseException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public DuplicateLeaseException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
