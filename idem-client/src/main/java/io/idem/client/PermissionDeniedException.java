package io.idem.client;

/**
 * The cluster runs with access control, and the client's principal (its certificate's subject)
 * holds no grant for this: a KV key outside its prefixes, an idempotency key scope or a lease name
 * it was not given, or a change only an admin may make ({@code PERMISSION_DENIED}). Nothing
 * changed. The message names the missing permission; ask an admin for a grant ({@code idem auth}).
 */
public final class PermissionDeniedException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public PermissionDeniedException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
