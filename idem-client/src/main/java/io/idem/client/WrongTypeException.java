package io.idem.client;

/**
 * The key holds the other kind of value: a list (written by append) where a plain value was
 * expected, or the reverse, or a non-number for increment.
 */
public class WrongTypeException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public WrongTypeException(String message) {
    super(message);
  }
}
