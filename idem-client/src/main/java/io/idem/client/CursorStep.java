package io.idem.client;

import org.jspecify.annotations.Nullable;

/**
 * One consumed record of a cursor commit ({@link IdemClient#commitCursor}): the cursor's position
 * after it, the write it makes and the key it completes, all applied together or not at all.
 *
 * @param position the cursor's position after this step (a Kafka record's offset + 1), above 0 and
 *     strictly increasing within a commit
 * @param effect the write applied with the step, or null
 * @param completion the key completed with the step, or null
 */
public record CursorStep(long position, @Nullable Write effect, @Nullable Completion completion) {

  /**
   * A key completion carried by a step.
   *
   * @param scope the key's scope
   * @param key the key
   * @param token the owner's fencing token, from its acquire
   * @param response the response to store, at most 64 KiB
   */
  public record Completion(String scope, String key, long token, byte[] response) {}

  public CursorStep {
    if (position <= 0) {
      throw new IllegalArgumentException("a step's position must be above 0, got " + position);
    }
  }

  /** A step that only moves the cursor to {@code position}. */
  public static CursorStep advance(long position) {
    return new CursorStep(position, null, null);
  }
}
