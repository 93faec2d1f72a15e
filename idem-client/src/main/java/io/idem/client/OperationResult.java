package io.idem.client;

/**
 * The server's answer to one write, as a type per operation. Every answer carries the log index of
 * the entry that applied it and whether it was the server's saved answer to an earlier copy of the
 * request (a retry) rather than a fresh execution. {@link IdemClient#recovered()} hands these out
 * for calls a previous instance had in flight.
 */
public sealed interface OperationResult
    permits WriteResult,
        DeleteResult,
        CasResult,
        CounterResult,
        AppendResult,
        LeaseResult,
        KeyAcquisition,
        KeySettlement,
        CursorClaim,
        CursorCommit {

  /** The log index of the entry that applied the operation. */
  long revision();

  /** Whether the answer was saved when an earlier copy of this request was applied. */
  boolean duplicate();
}
