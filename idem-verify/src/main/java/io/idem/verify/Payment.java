package io.idem.verify;

import io.idem.keys.IdempotencyKey;
import java.nio.charset.StandardCharsets;

/**
 * Payment {@code i} of the keys campaign: seed 001's {@code withdraw(id, account, amount)}, with
 * its idempotency key {@code pay-i}. Every store and the checker derive the same account, amount,
 * ledger entry and answer from {@code i}.
 *
 * @param i the payment's number
 * @param account the account it debits
 * @param amount what it debits
 */
record Payment(long i, int account, long amount) {

  /** Payment {@code i} over {@code accounts} accounts. */
  static Payment of(long i, int accounts) {
    return new Payment(i, (int) (i % accounts), 1 + (i * 31) % 97);
  }

  /** The idempotency key: {@code pay-i}. */
  String key() {
    return PaymentWorker.key(i);
  }

  /** The key as the library's stores take it: {@code pay-i} in {@link IdemPayments#SCOPE}. */
  IdempotencyKey idempotencyKey() {
    return new IdempotencyKey(IdemPayments.SCOPE, key());
  }

  /** What the duplicates must agree on: account and amount. */
  byte[] fingerprint() {
    return (account + ":" + amount).getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The ledger entry {@code i:amount:tag}: the tag is the owner's fencing token, or, on a store
   * without tokens (seed 001), the paying process's id.
   */
  String entry(long tag) {
    return i + ":" + amount + ":" + tag;
  }

  /** The answer a worker gives for the payment it ran under {@code tag}. */
  String response(long tag) {
    return "paid " + i + " amount " + amount + " token " + tag;
  }

  /**
   * The tag of a ledger entry ({@link #entry}) or an answer ({@link #response}): its last field.
   */
  static long tagOf(String entryOrResponse) {
    int sep = Math.max(entryOrResponse.lastIndexOf(':'), entryOrResponse.lastIndexOf(' '));
    return Long.parseLong(entryOrResponse.substring(sep + 1));
  }
}
