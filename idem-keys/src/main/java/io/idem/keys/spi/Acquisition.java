package io.idem.keys.spi;

import java.util.Arrays;

/** What a store answers to an acquire: exactly one of four. */
public sealed interface Acquisition {

  /**
   * The caller owns the key until {@code deadlineMs} (the store's clock) under {@code token},
   * strictly greater than every token handed out before for that key.
   */
  record Acquired(long token, long deadlineMs) implements Acquisition {}

  /** The key was completed: replay {@code response}. Equal by content. */
  record Completed(byte[] response) implements Acquisition {
    @Override
    public boolean equals(Object o) {
      return o instanceof Completed c && Arrays.equals(response, c.response);
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(response);
    }

    @Override
    public String toString() {
      return "Completed[" + response.length + " bytes]";
    }
  }

  /** Another owner holds the key until {@code deadlineMs} (the store's clock). */
  record InProgress(long deadlineMs) implements Acquisition {}

  /** The key was used with another fingerprint. */
  record Mismatch() implements Acquisition {}
}
