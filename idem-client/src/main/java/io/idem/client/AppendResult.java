package io.idem.client;

/**
 * What an append returns.
 *
 * @param length the list's length after the append
 * @param revision the log index of the entry that applied it
 * @param duplicate whether the answer was the saved answer to an earlier copy of this request
 */
public record AppendResult(long length, long revision, boolean duplicate)
    implements OperationResult {}
