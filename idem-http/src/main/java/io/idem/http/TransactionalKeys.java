package io.idem.http;

import io.idem.keys.Fingerprint;
import io.idem.keys.IdempotencyKey;

/**
 * A key store that runs a keyed request inside its own transaction, with the key's acquisition and
 * its completion (the PostgreSQL store's transactional mode, {@code PostgresKeyStore.inTransaction}
 * on a connection of the application's pool): the handler's writes through the transaction and the
 * stored response commit together, or neither does. Give it to {@link
 * IdempotencyFilter#builder(TransactionalKeys)}; the handler reaches the transaction with {@link
 * IdempotentRequest#transaction}.
 *
 * <p>Implementations are thread-safe and bound every wait (a duplicate waits for the key's lock, at
 * most the store's lock timeout).
 */
@FunctionalInterface
public interface TransactionalKeys {

  /**
   * Runs {@code step} once for {@code key} in one transaction that also acquires the key and stores
   * the step's bytes as its outcome; or returns the bytes stored for it before, without running it.
   *
   * @return the step's bytes, from this run or stored
   * @throws io.idem.keys.KeyMismatchException the key was used with another fingerprint
   * @throws io.idem.keys.KeyInProgressException another request held the key too long
   * @throws io.idem.keys.KeyStoreException the store failed; the outcome is unknown
   * @throws Exception what the step threw, its writes rolled back with the key
   */
  byte[] run(IdempotencyKey key, Fingerprint fingerprint, Step step) throws Exception;

  /** The request's part, run inside the transaction. */
  @FunctionalInterface
  interface Step {
    /**
     * @param transaction the store's handle on the transaction (a {@code java.sql.Connection} on
     *     PostgreSQL); the step must not commit or roll it back
     * @param fencingToken the token of this ownership of the key
     * @return the bytes to store and replay
     */
    byte[] run(Object transaction, long fencingToken) throws Exception;
  }
}
