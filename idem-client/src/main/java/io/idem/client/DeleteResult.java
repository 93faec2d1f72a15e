package io.idem.client;

/**
 * What a delete returns.
 *
 * @param existed whether the key existed (and was deleted)
 * @param revision the log index of the entry that applied the delete
 * @param duplicate whether the answer was the saved answer to an earlier copy of this request
 */
public record DeleteResult(boolean existed, long revision, boolean duplicate)
    implements OperationResult {}
