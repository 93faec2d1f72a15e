package io.idem.client;

/**
 * The call was refused because the caller's principal is at one of its quotas ({@code
 * QUOTA_EXCEEDED}): nothing changed. The message names the quota, its value and what the principal
 * holds. Free some (delete keys, release or let key records expire, revoke leases, acknowledge
 * answers), or ask an operator to raise the quota ({@code idem config set --quota}, or a role's
 * quotas).
 */
public final class QuotaExceededException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public QuotaExceededException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
