package io.idem.client;

/**
 * What {@link IdemClient#claimCursor} answers: the claim's epoch, which fences every earlier
 * claimant of the cursor, and the position committed so far.
 *
 * @param epoch the epoch of this claim; every commit under it names it
 * @param position the cursor's committed position (the next record to consume), -1 if none yet
 * @param revision the log index of the entry that applied it
 * @param duplicate whether this was the saved answer to an earlier copy of the request
 */
public record CursorClaim(long epoch, long position, long revision, boolean duplicate)
    implements OperationResult {

  /** Whether a commit has set the position. */
  public boolean hasPosition() {
    return position >= 0;
  }
}
