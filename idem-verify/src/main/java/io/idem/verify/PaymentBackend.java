package io.idem.verify;

import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * The client side of a store the keys campaign runs payments on: what a {@link PaymentWorker} does
 * to one payment, and what the checker reads back afterwards. One implementation per store, made by
 * its {@link PaymentStore}; one instance per worker process, and one for the campaign's settling
 * pass and checker. Thread-safe: a worker's lanes share it.
 *
 * <p>Every call blocks (bounded by the store's own timeout) and throws {@link Unavailable} when the
 * store failed or did not answer: the outcome is unknown, and the worker asks again with the same
 * key, as a caller of the library would.
 */
interface PaymentBackend extends AutoCloseable {

  /** What an acquire of a payment's key answered. */
  sealed interface Claim {
    /** This worker owns the key under {@code token} (0 on a store without tokens). */
    record Owned(long token) implements Claim {}

    /** Completed: replay {@code response}, or null where the store keeps none (seed 001). */
    record Done(String response) implements Claim {}

    /** Another owner holds it: ask again shortly. */
    record Busy() implements Claim {}

    /** The key was used for another payment. */
    record Mismatch() implements Claim {}
  }

  /**
   * A key record as the checker reads it.
   *
   * @param completed whether the key is completed (seed 001: Confirmed)
   * @param token the token it was completed (or is held) under; -1 where the store has none
   * @param response the stored response; null where the store keeps none
   */
  record KeyState(boolean completed, long token, String response) {}

  /** How one attempt at a payment ({@link #pay}) ended. */
  sealed interface Attempt {
    /** Completed under the attempt's token; {@code response} is the answer stored with it. */
    record Paid(String response) implements Attempt {}

    /**
     * Refused: a newer owner fenced the token off, or, with {@code pastDeadline}, a fenced write
     * came after the token's deadline while the key still had it (Idem, log format 8).
     */
    record Fenced(boolean pastDeadline) implements Attempt {}
  }

  /** The store failed or did not answer: outcome unknown, ask again with the same key. */
  final class Unavailable extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Unavailable(String message, Throwable cause) {
      super(message, cause);
    }
  }

  /** Acquires payment {@code p}'s key for {@code inProgress}, or says what holds it. */
  Claim acquire(Payment p, Duration inProgress);

  /**
   * The payment's business writes under {@code token} and the key's completion: the ledger entry
   * lands atomically with the completion where the store can (Idem, Redis), as a command of its own
   * before it where it cannot or is told not to (seed 001; on Idem {@link
   * PaymentStore.Writes#FENCED_LEDGER} and the unfenced negative control).
   *
   * @return {@link Attempt.Paid} with the answer stored with the completion, or {@link
   *     Attempt.Fenced} if {@code token} was fenced off (with the ledger entry in the completion,
   *     nothing of this attempt landed then; a fenced ledger append may have)
   */
  Attempt pay(Payment p, long token);

  /** The ledger of {@code account}: its entries, in order ({@link Payment#entry}). */
  List<String> ledger(int account);

  /** Payment {@code p}'s key record, if there is one. */
  Optional<KeyState> key(Payment p);

  /**
   * The token in payment {@code i}'s status record, written by its owner before the completion,
   * fenced where the store can fence a write of its own (Idem); empty where none was written, and
   * always on a store without status records ({@link PaymentStore.Capabilities#statusRecords}).
   */
  default Optional<Long> statusToken(long i) {
    return Optional.empty();
  }

  @Override
  void close();
}
