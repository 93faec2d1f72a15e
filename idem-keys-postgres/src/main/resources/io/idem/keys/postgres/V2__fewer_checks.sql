-- Idem keys on PostgreSQL, schema version 2: two CHECK constraints of version 1 go, because each
-- INSERT re-reads and compiles every CHECK of the table, and these two cost about 4% of the
-- server's throughput in the transactional mode (docs/PERFORMANCE.md, "PostgreSQL: two checks
-- fewer"). What they checked stays true, since the schema's functions are the only writers of
-- idem_keys: a state is 'in_progress' or 'completed' (the functions write nothing else), and a
-- fingerprint is at most 64 bytes (PostgresKeyStore refuses a longer one before it calls the
-- database; Fingerprint gives 32 bytes, or none). The check that ties a completed state to its response stays.
-- Dropping a constraint changes the catalog only: no rewrite, no scan, a brief exclusive lock.

ALTER TABLE idem_keys
  DROP CONSTRAINT IF EXISTS idem_keys_state_check,
  DROP CONSTRAINT IF EXISTS idem_keys_fingerprint_check;
