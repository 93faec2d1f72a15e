package io.idem.client;

/**
 * The call was refused because the cluster's replicated state is at its backend budget ({@code
 * NO_SPACE}): nothing changed. Writes that would grow the state are refused for every client until
 * it shrinks below 90% of the budget; reads, deletes, completions and releases still work. Retry
 * later, or ask an operator to free space or raise the budget ({@code idem config set
 * --backend-bytes}).
 */
public final class NoSpaceException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public NoSpaceException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
