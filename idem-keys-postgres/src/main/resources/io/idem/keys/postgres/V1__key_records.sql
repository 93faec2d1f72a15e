-- Idem keys on PostgreSQL, schema version 1: the key records, the token sequence, and one function
-- per transition (acquire, complete, release, renew, purge), each one round trip and one atomic
-- step. PostgresKeyStore.migrate() applies this file once, in one transaction, and records it in
-- idem_keys_schema. A team that runs its own migration tool may apply this file with it instead.
--
-- Time: every decision reads the database's clock, statement_timestamp() (when the statement
-- began, one value for the whole call); never the application host's.
--
-- Tokens: nextval of idem_key_tokens, drawn only while the acquire holds the key's advisory lock,
-- so a later acquire of a key always draws a greater token than every earlier one, even once the
-- record that carried the earlier one is gone (released, expired, purged). CACHE 1 is required:
-- with a per-session cache two sessions hand out tokens out of order.

CREATE SEQUENCE idem_key_tokens AS bigint MINVALUE 1 NO CYCLE CACHE 1;

CREATE TABLE idem_keys (
  scope        varchar(255) NOT NULL,
  key          varchar(255) NOT NULL,
  fingerprint  bytea        NOT NULL CHECK (octet_length(fingerprint) <= 64),
  state        text         NOT NULL CHECK (state IN ('in_progress', 'completed')),
  token        bigint       NOT NULL,
  deadline     timestamptz  NOT NULL,
  retention    interval     NOT NULL,
  response     bytea,
  completed_at timestamptz,
  expires_at   timestamptz  NOT NULL,
  PRIMARY KEY (scope, key),
  CHECK ((state = 'completed') = (response IS NOT NULL AND completed_at IS NOT NULL))
);

-- The purge walks records in expiry order.
CREATE INDEX idem_keys_expires_at ON idem_keys (expires_at);

-- Milliseconds since the epoch, rounded down: a deadline reported to a caller is never later than
-- the one the database decides by.
CREATE FUNCTION idem_key_ms(t timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT floor(extract(epoch FROM t) * 1000)::bigint $$;

-- The token of the key's owner while it is in progress and not expired, else 0.
CREATE FUNCTION idem_key_owner(p_scope text, p_key text, t timestamptz) RETURNS bigint
LANGUAGE sql STABLE
AS $$
  SELECT coalesce(
    (SELECT k.token FROM idem_keys k
      WHERE k.scope = p_scope AND k.key = p_key AND k.state = 'in_progress' AND k.expires_at >= t),
    0)
$$;

-- Acquires the key, or answers what holds it: outcome 'A' (acquired: token, deadline_ms), 'C'
-- (completed: response), 'I' (in progress: deadline_ms) or 'M' (another fingerprint). A record
-- whose expires_at has passed counts as absent and is replaced. The owner holds the key up to its
-- deadline inclusive. p_lock_timeout_ms bounds the wait behind a transaction that holds the key
-- (SQLSTATE 55P03 when it runs out); the SET clause restores the caller's lock_timeout on exit.
-- synchronous_commit is forced on for the caller's transaction: a token or a completion that a
-- crash could take back would let two owners hold the same token.
CREATE FUNCTION idem_key_acquire(
    p_scope text, p_key text, p_fingerprint bytea,
    p_timeout_ms bigint, p_retention_ms bigint, p_lock_timeout_ms bigint,
    OUT outcome "char", OUT token bigint, OUT deadline_ms bigint, OUT response bytea)
LANGUAGE plpgsql
SET lock_timeout = 0
AS $$
DECLARE
  t  timestamptz := statement_timestamp();
  dl timestamptz := statement_timestamp() + p_timeout_ms * interval '1 millisecond';
  rt interval    := p_retention_ms * interval '1 millisecond';
  r  idem_keys%ROWTYPE;
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
  PERFORM set_config('synchronous_commit', 'on', true);
  -- Serialises the acquires of one key until the acquiring transaction ends, so that tokens are
  -- drawn in the order the key changes hands (two-key form: class 'IDKY', then the key's hash;
  -- keys whose hashes collide only wait for each other).
  PERFORM pg_advisory_xact_lock(1229212505, hashtext(p_scope || E'\n' || p_key));
  SELECT * INTO r FROM idem_keys k WHERE k.scope = p_scope AND k.key = p_key FOR UPDATE;
  IF FOUND AND r.expires_at >= t THEN
    IF r.fingerprint <> p_fingerprint THEN
      outcome := 'M';
      RETURN;
    END IF;
    IF r.state = 'completed' THEN
      outcome := 'C';
      response := r.response;
      RETURN;
    END IF;
    IF r.deadline >= t THEN
      outcome := 'I';
      deadline_ms := idem_key_ms(r.deadline);
      RETURN;
    END IF;
  END IF;
  IF FOUND THEN
    -- A takeover after the owner's deadline, or an expired record replaced.
    UPDATE idem_keys k
       SET fingerprint = p_fingerprint, state = 'in_progress', token = nextval('idem_key_tokens'),
           deadline = dl, retention = rt, response = NULL, completed_at = NULL, expires_at = dl + rt
     WHERE k.scope = p_scope AND k.key = p_key
    RETURNING k.token INTO token;
  ELSE
    INSERT INTO idem_keys (scope, key, fingerprint, state, token, deadline, retention, expires_at)
    VALUES (p_scope, p_key, p_fingerprint, 'in_progress', nextval('idem_key_tokens'), dl, rt, dl + rt)
    RETURNING idem_keys.token INTO token;
  END IF;
  outcome := 'A';
  deadline_ms := idem_key_ms(dl);
END
$$;

-- Stores the response if p_token still owns the key in progress: done, or the current owner's
-- token (0 if none).
CREATE FUNCTION idem_key_complete(
    p_scope text, p_key text, p_token bigint, p_response bytea,
    OUT done boolean, OUT current bigint)
LANGUAGE plpgsql
AS $$
DECLARE
  t timestamptz := statement_timestamp();
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  UPDATE idem_keys k
     SET state = 'completed', response = p_response, completed_at = t, expires_at = t + k.retention
   WHERE k.scope = p_scope AND k.key = p_key AND k.token = p_token
     AND k.state = 'in_progress' AND k.expires_at >= t;
  done := FOUND;
  current := CASE WHEN done THEN p_token ELSE idem_key_owner(p_scope, p_key, t) END;
END
$$;

-- Drops the key if p_token still owns it in progress (the step failed and did nothing).
CREATE FUNCTION idem_key_release(
    p_scope text, p_key text, p_token bigint,
    OUT done boolean, OUT current bigint)
LANGUAGE plpgsql
AS $$
DECLARE
  t timestamptz := statement_timestamp();
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  DELETE FROM idem_keys k
   WHERE k.scope = p_scope AND k.key = p_key AND k.token = p_token
     AND k.state = 'in_progress' AND k.expires_at >= t;
  done := FOUND;
  current := CASE WHEN done THEN 0 ELSE idem_key_owner(p_scope, p_key, t) END;
END
$$;

-- Moves the owner's deadline to now + p_extension_ms if p_token still owns the key in progress.
CREATE FUNCTION idem_key_renew(
    p_scope text, p_key text, p_token bigint, p_extension_ms bigint,
    OUT done boolean, OUT current bigint, OUT deadline_ms bigint)
LANGUAGE plpgsql
AS $$
DECLARE
  t  timestamptz := statement_timestamp();
  dl timestamptz := statement_timestamp() + p_extension_ms * interval '1 millisecond';
BEGIN
  PERFORM set_config('synchronous_commit', 'on', true);
  UPDATE idem_keys k
     SET deadline = dl, expires_at = dl + k.retention
   WHERE k.scope = p_scope AND k.key = p_key AND k.token = p_token
     AND k.state = 'in_progress' AND k.expires_at >= t;
  done := FOUND;
  IF done THEN
    current := p_token;
    deadline_ms := idem_key_ms(dl);
  ELSE
    current := idem_key_owner(p_scope, p_key, t);
    deadline_ms := 0;
  END IF;
END
$$;

-- Deletes up to p_limit records whose retention has ended, oldest first, skipping records another
-- transaction holds; returns how many. Bounded, so that it never holds many locks for long.
CREATE FUNCTION idem_keys_purge(p_limit integer) RETURNS integer
LANGUAGE sql
AS $$
  WITH due AS (
    SELECT k.scope, k.key FROM idem_keys k
     WHERE k.expires_at < statement_timestamp()
     ORDER BY k.expires_at
     LIMIT p_limit
       FOR UPDATE SKIP LOCKED),
  gone AS (
    DELETE FROM idem_keys k USING due
     WHERE k.scope = due.scope AND k.key = due.key
    RETURNING 1)
  SELECT count(*)::integer FROM gone
$$;
