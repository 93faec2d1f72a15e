package io.idem.core;

import java.io.IOException;

/**
 * A session snapshot could not be read: wrong magic, unknown version, a checksum mismatch, a value
 * out of range, or input that ends early. No table is produced when this is thrown.
 */
public final class SnapshotFormatException extends IOException {
  private static final long serialVersionUID = 1L;

  /** Creates an exception with a message that says what was wrong and where. */
  public SnapshotFormatException(String message) {
    super(message);
  }

  /**
   * Creates an exception with a cause, such as the {@link java.io.EOFException} of a truncation.
   */
  public SnapshotFormatException(String message, Throwable cause) {
    super(message, cause);
  }
}
