/**
 * The key store on PostgreSQL ({@code io.idem.keys.postgres.PostgresKeyStore}), over any JDBC
 * {@code DataSource}. Only {@code io.idem.keys.postgres} is exported; the schema's DDL files are
 * resources of that package, read by the module itself.
 */
// requires-automatic: the PostgreSQL driver ships no module-info, only the Automatic-Module-Name
// org.postgresql.jdbc; the transactional mode reads the connection's transaction state through its
// BaseConnection, so the module cannot do without it, and javac's warning about that requires
// would fail the build under -Werror.
@SuppressWarnings("requires-automatic")
module io.idem.keys.postgres {
  requires transitive io.idem.keys;
  // The API takes a DataSource and a Connection.
  requires transitive java.sql;
  requires org.postgresql.jdbc;

  exports io.idem.keys.postgres;
}
