package io.idem.client;

/**
 * What an increment returns.
 *
 * @param value the counter's value after the increment
 * @param revision the log index of the entry that applied it
 * @param duplicate whether the answer was the saved answer to an earlier copy of this request
 */
public record CounterResult(long value, long revision, boolean duplicate)
    implements OperationResult {}
