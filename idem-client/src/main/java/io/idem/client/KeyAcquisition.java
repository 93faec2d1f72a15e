package io.idem.client;

import java.util.Arrays;

/**
 * What {@link IdemClient#acquireKey} answers: exactly one of four. Being a session operation, an
 * acquire is applied once: a retry after a lost answer gets this same answer (the same token),
 * never a second owner.
 */
public sealed interface KeyAcquisition extends OperationResult {

  /**
   * The caller owns the key until {@code deadlineMs} (log time) under {@code token}, strictly
   * greater than every token handed out before for that key.
   *
   * @param token the fencing token: the acquire's log position
   * @param deadlineMs when another acquire may take the key over (log ms, inclusive)
   * @param takeover whether it was taken over from an owner whose deadline had passed
   * @param revision the log index of the entry that applied the acquire
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Acquired(long token, long deadlineMs, boolean takeover, long revision, boolean duplicate)
      implements KeyAcquisition {

    /** A fence with this token, for writes that must not land once someone else owns the key. */
    public Fence fence(String scope, String key) {
      return new Fence(scope, key, token);
    }
  }

  /**
   * The key was completed: replay {@code response}.
   *
   * @param response the stored response (do not modify)
   * @param revision the log index of the entry that applied the acquire
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Completed(byte[] response, long revision, boolean duplicate) implements KeyAcquisition {
    @Override
    public boolean equals(Object o) {
      return o instanceof Completed c
          && Arrays.equals(response, c.response)
          && revision == c.revision
          && duplicate == c.duplicate;
    }

    @Override
    public int hashCode() {
      return Arrays.hashCode(response) * 31 + Long.hashCode(revision);
    }

    @Override
    public String toString() {
      return "Completed[" + response.length + " bytes, revision " + revision + "]";
    }
  }

  /**
   * Another owner holds the key until {@code deadlineMs} (log time).
   *
   * @param deadlineMs the owner's deadline (log ms)
   * @param revision the log index of the entry that applied the acquire
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record InProgress(long deadlineMs, long revision, boolean duplicate) implements KeyAcquisition {}

  /**
   * The key was used with another fingerprint; nothing changed.
   *
   * @param revision the log index of the entry that applied the acquire
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Mismatch(long revision, boolean duplicate) implements KeyAcquisition {}
}
