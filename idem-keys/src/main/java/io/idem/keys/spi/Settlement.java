package io.idem.keys.spi;

import java.util.Arrays;

/** What a store answers to complete, release and renew: exactly one of three. */
public sealed interface Settlement {

  /** Done; for a renew, the new deadline (the store's clock), else 0. */
  record Done(long deadlineMs) implements Settlement {}

  /**
   * The token no longer owns the key: another owner took it over, or the record is gone (released,
   * or expired after its retention). Nothing changed. {@code current} is the current owner's token,
   * 0 if none.
   */
  record Fenced(long current) implements Settlement {}

  /**
   * The key is already completed (by another owner, or earlier under this token with another
   * response): {@code response} is its stored outcome, the one every retry replays. Nothing
   * changed; this call's response (and effect) was not stored. Equal by content.
   */
  record Completed(byte[] response) implements Settlement {
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
}
