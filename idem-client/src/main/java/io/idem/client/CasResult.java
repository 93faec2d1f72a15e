package io.idem.client;

/**
 * What a compare-and-set returns.
 *
 * @param written whether the value was written (the key was at the expected version)
 * @param version the key's version now: the new version if written, else the current one (0: the
 *     key does not exist), which is the version to expect in the next attempt
 * @param revision the log index of the entry that applied the operation
 * @param duplicate whether the answer was the saved answer to an earlier copy of this request
 */
public record CasResult(boolean written, long version, long revision, boolean duplicate)
    implements OperationResult {}
