package io.idem.keys;

import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * The operation ran, but its outcome was not stored: the key was no longer this owner's (it was
 * past its deadline and another owner took the key over, or the record is gone), or another owner
 * completed it first. Writes the operation fenced with its token were refused once the token lost
 * the key (see docs/KEYS.md for what a fenced write guarantees).
 *
 * <p>{@link #completedByAnother()} tells the two apart: when another owner completed the key, its
 * outcome is the one every retry replays, and {@link #otherOutcome} decodes it.
 */
public final class KeyFencedException extends KeyException {
  private static final long serialVersionUID = 1L;

  private final byte @Nullable []
      otherResponse; // the stored outcome if another owner completed the key

  /** With the key, what happened, and the cause if any: the key changed hands. */
  public KeyFencedException(
      @Nullable IdempotencyKey key, String message, @Nullable Throwable cause) {
    this(key, message, cause, null);
  }

  /**
   * With the key, what happened, the cause if any, and the outcome another owner stored (null if
   * none did).
   */
  public KeyFencedException(
      @Nullable IdempotencyKey key,
      String message,
      @Nullable Throwable cause,
      byte @Nullable [] otherResponse) {
    super(key, message, cause);
    this.otherResponse = otherResponse == null ? null : otherResponse.clone();
  }

  /** Whether another owner completed the key: its outcome stands, this run's was not stored. */
  public boolean completedByAnother() {
    return otherResponse != null;
  }

  /**
   * The outcome another owner stored, as the executor's raw bytes (the form {@link
   * IdempotentExecutor} stores); empty unless {@link #completedByAnother()}.
   */
  public Optional<byte[]> otherResponse() {
    return Optional.ofNullable(otherResponse).map(byte[]::clone);
  }

  /**
   * The outcome another owner stored, decoded as a retry would replay it.
   *
   * @throws StoredFailureException the other owner's outcome is a stored failure
   * @throws IllegalStateException no other owner completed the key
   */
  public <T> T otherOutcome(IdempotentExecutor.Codec<T> codec) {
    if (otherResponse == null) {
      throw new IllegalStateException("no other owner completed the key", this);
    }
    return StoredOutcomes.replay(key(), codec, otherResponse);
  }
}
