package io.idem.client;

/** No lease of that name lives: it expired, was revoked, or never existed. */
public class LeaseNotFoundException extends IdemException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public LeaseNotFoundException(String message) {
    super(message);
  }
}
