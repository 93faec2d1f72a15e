package io.idem.client;

/**
 * The server refused the operation as malformed: a key or value too large, a bad TTL or name. A
 * definite answer; the operation was not applied.
 */
public class InvalidArgumentException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public InvalidArgumentException(String message) {
    super(message);
  }
}
