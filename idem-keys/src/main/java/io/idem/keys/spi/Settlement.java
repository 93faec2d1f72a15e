package io.idem.keys.spi;

/** What a store answers to complete, release and renew. */
public sealed interface Settlement {

  /** Done; for a renew, the new deadline (the store's clock), else 0. */
  record Done(long deadlineMs) implements Settlement {}

  /**
   * The token is no longer the key's current one: another owner took over (or the record is gone).
   * Nothing changed. {@code current} is the current owner's token, 0 if none.
   */
  record Fenced(long current) implements Settlement {}
}
