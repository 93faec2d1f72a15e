package io.idem.client;

/**
 * The key holds another type of value (a counter or a list where the operation needs the other):
 * {@code WRONG_TYPE}.
 */
public final class WrongTypeException extends RejectedException {
  private static final long serialVersionUID = 1L;

  /** For the client and its tests; applications only catch it. */
  public WrongTypeException(String message, long sessionId, long requestNumber) {
    super(message, sessionId, requestNumber);
  }
}
