package io.idem.client;

/**
 * The call's deadline passed before an answer arrived. The request stays in the session and is
 * still applied at most once; its answer, when it comes, is dropped.
 */
public class IdemTimeoutException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public IdemTimeoutException(String message) {
    super(message);
  }
}
