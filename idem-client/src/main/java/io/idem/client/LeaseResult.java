package io.idem.client;

/**
 * What a lease grant, renewal or revocation returns.
 *
 * @param logTimeMs for a grant or renewal, the lease's expiry; for a revocation, the log time at
 *     which it ended (milliseconds of log time: the leaders' clocks as stamped into the log)
 * @param revision the log index of the entry that applied it
 * @param duplicate whether the answer was the saved answer to an earlier copy of this request
 */
public record LeaseResult(long logTimeMs, long revision, boolean duplicate)
    implements OperationResult {}
