package io.idem.examples.payments;

import io.idem.http.IdempotencyFilter;
import io.idem.http.IdempotentRequest;
import io.idem.keys.IdempotencyKey;
import java.util.Optional;

/**
 * Where the payments service keeps its accounts: the backend of its key store (balances on the Idem
 * cluster, in Redis, or in a PostgreSQL table), so that a withdrawal's debit can land with its
 * key's completion. Thread-safe; the servlet calls it from every request thread.
 */
interface Balances extends AutoCloseable {

  /** The key store these balances live beside. */
  PaymentsService.Store store();

  /** A filter builder over this backend's key records. */
  IdempotencyFilter.Builder filter();

  /** Creates {@code account} with {@code balance} unless it exists. */
  void open(String account, long balance);

  /**
   * The balance of {@code account}; inside a keyed request's transaction (PostgreSQL), read there.
   */
  Optional<Long> balance(Optional<IdempotentRequest> keyed, String account);

  /** Debits {@code amount} on its own: the plain endpoint's write. */
  void debit(String account, long amount);

  /**
   * Debits {@code amount} so that the debit lands with {@code keyed}'s stored response or not at
   * all: as the completion's effect (Idem, Redis), or in the key's transaction (PostgreSQL).
   */
  void debit(IdempotentRequest keyed, String account, long amount);

  /**
   * What the filter stored for {@code key} once completed (its response, format version 1); empty
   * if the key has no completed record (none, in progress, or past its retention).
   */
  Optional<byte[]> storedResponse(IdempotencyKey key);

  /** Closes what this backend opened (not what it was given). */
  @Override
  void close();
}
