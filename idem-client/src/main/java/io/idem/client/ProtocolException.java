package io.idem.client;

/**
 * The server reported a client protocol error ({@code WINDOW_EXCEEDED}, {@code
 * RESPONSE_DISCARDED}). A bug in the client: report it.
 */
public final class ProtocolException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public ProtocolException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
