package io.idem.client;

/** What {@link IdemClient#completeKey}, {@link IdemClient#releaseKey} and renew answer. */
public sealed interface KeySettlement extends OperationResult {

  /**
   * Done.
   *
   * @param deadlineMs for a renew, the new deadline (log ms); else 0
   * @param effectNumber for a complete with an increment or append effect, the counter's new value
   *     or the list's new length; else 0
   * @param revision the log index of the entry that applied it
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Settled(long deadlineMs, long effectNumber, long revision, boolean duplicate)
      implements KeySettlement {}

  /**
   * The token is no longer the key's current one: another owner took it over, or the record is gone
   * (released, expired, completed). Nothing changed, the effect of a complete included.
   *
   * @param currentToken the current owner's token, 0 if none
   * @param revision the log index of the entry that applied it
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Fenced(long currentToken, long revision, boolean duplicate) implements KeySettlement {}
}
