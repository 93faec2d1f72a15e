package io.idem.client;

/**
 * What a write returns.
 *
 * @param revision the log index of the entry that applied the write
 * @param version the key's version after it (1 after the first write; 0 after a delete)
 * @param duplicate whether the answer was the server's saved answer to an earlier copy of this
 *     request (a retry), rather than a fresh execution
 */
public record WriteResult(long revision, long version, boolean duplicate) {}
