package io.idem.client;

import org.jspecify.annotations.Nullable;

/** What {@link IdemClient#commitCursor} answers. */
public sealed interface CursorCommit extends OperationResult {

  /** The cursor's position after the command (-1: none committed). */
  long position();

  /**
   * Every step was applied, or skipped as committed before.
   *
   * @param position the cursor's position after the command
   * @param revision the log index of the entry that applied it
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Committed(long position, long revision, boolean duplicate) implements CursorCommit {}

  /**
   * The steps before {@code stepsDone} were applied (or skipped), and step {@code stepsDone} could
   * not apply, so the cursor stopped at {@code position}. Either its write was refused ({@code
   * refusal}), or its key is no longer its token's ({@code refusal} null, {@code keyToken} the
   * key's current token, 0 if none).
   *
   * @param position the cursor's position after the command
   * @param stepsDone how many steps were applied or skipped
   * @param refusal why the step's write was refused, or null
   * @param keyToken for a key that is not the step's token's: its current token
   * @param revision the log index of the entry that applied it
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Stopped(
      long position,
      int stepsDone,
      @Nullable RejectedException refusal,
      long keyToken,
      long revision,
      boolean duplicate)
      implements CursorCommit {}

  /**
   * The commit's epoch is not the cursor's: a newer claim fenced the caller (or the cursor was
   * never claimed). Nothing changed.
   *
   * @param epoch the cursor's current epoch, 0 if it has none
   * @param position the cursor's position
   * @param revision the log index of the entry that applied it
   * @param duplicate whether this was the saved answer to an earlier copy of the request
   */
  record Fenced(long epoch, long position, long revision, boolean duplicate)
      implements CursorCommit {}
}
