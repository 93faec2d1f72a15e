package io.idem.client;

/**
 * Root of the client's exceptions. Subtypes say what the caller should do: {@link
 * OutcomeUnknownException} and {@link IdemTimeoutException} leave the outcome open (applied at most
 * once); {@link FencedException} is fatal; the business ones ({@link DuplicateLeaseException},
 * {@link LeaseNotFoundException}, {@link WrongTypeException}, {@link InvalidArgumentException}) are
 * definite answers, saved by the server like any other.
 */
public class IdemException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** With a message that says what happened. */
  public IdemException(String message) {
    super(message);
  }

  /** With a cause. */
  public IdemException(String message, Throwable cause) {
    super(message, cause);
  }
}
