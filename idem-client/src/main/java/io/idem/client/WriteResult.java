package io.idem.client;

/**
 * What a put returns.
 *
 * @param revision the log index of the entry that applied the write
 * @param version the key's version after it (1 after the first write)
 * @param duplicate whether the answer was the server's saved answer to an earlier copy of this
 *     request (a retry), rather than a fresh execution
 */
public record WriteResult(long revision, long version, boolean duplicate)
    implements OperationResult {}
