package io.idem.client;

/**
 * A newer instance of this client resumed the session (or the secret was refused): this instance is
 * closed. Fatal.
 */
public class FencedException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public FencedException(String message) {
    super(message);
  }
}
