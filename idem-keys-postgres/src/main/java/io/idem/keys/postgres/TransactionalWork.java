package io.idem.keys.postgres;

import java.sql.Connection;

/**
 * The business step of {@link PostgresKeyStore#inTransaction}: its writes go through {@code
 * connection}, inside the transaction that also records the key's outcome, so both commit or
 * neither does. It must not commit, roll back, or change the connection's auto-commit mode.
 */
@FunctionalInterface
public interface TransactionalWork {

  /**
   * Runs the step once per key (unless it fails and its failure is not stored).
   *
   * @param connection the caller's connection, inside the transaction
   * @param fencingToken the token of this ownership of the key
   * @return the response to store and replay to every retry (not null; may be empty)
   */
  byte[] run(Connection connection, long fencingToken) throws Exception;
}
