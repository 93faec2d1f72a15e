package io.idem.client;

/**
 * The server reported a client protocol error (WINDOW_EXCEEDED or RESPONSE_DISCARDED): a bug in the
 * client, never expected.
 */
public class ProtocolException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public ProtocolException(String message) {
    super(message);
  }
}
