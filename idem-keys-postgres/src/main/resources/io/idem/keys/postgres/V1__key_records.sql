-- Idem keys on PostgreSQL, schema version 1: the key records, the token sequence, and one function
-- per transition (acquire, complete, release, renew and purge; begin and finish for the
-- transactional mode), each one round trip and one atomic step. PostgresKeyStore.migrate() applies this file once, in one transaction, and records it in
-- idem_keys_schema. A team that runs its own migration tool may apply this file with it instead.
--
-- Time: every decision reads the database's clock, statement_timestamp() (when the statement
-- began, one value for the whole call); never the application host's. A call that waited for a
-- lock decides by a time a little in the past: later takeovers, shorter deadlines, never earlier.
--
-- Tokens: nextval of idem_key_tokens, drawn only while the acquire holds the key's advisory lock,
-- so a later acquire of a key always draws a greater token than every earlier one, even once the
-- record that carried the earlier one is gone (released, expired, purged). CACHE 1 is required:
-- with a per-session cache two sessions hand out tokens out of order.

CREATE SEQUENCE idem_key_tokens AS bigint MINVALUE 1 NO CYCLE CACHE 1;

-- Scopes and keys are identifiers, compared byte for byte: COLLATE "C" whatever the database's
-- locale, which also keeps the primary key's comparisons cheap.
CREATE TABLE idem_keys (
  scope        varchar(255) COLLATE "C" NOT NULL,
  key          varchar(255) COLLATE "C" NOT NULL,
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

-- Every transition forces synchronous_commit on for the caller's transaction (unless it is on
-- already, or remote_write/remote_apply/local, which flush locally too): a token or a completion
-- that a crash of the server could take back would let two owners hold the same token.
CREATE FUNCTION idem_key_durable() RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
END
$$;

-- The key's advisory lock when another transaction holds it (idem_key_begin tries without
-- waiting first): waits at most p_lock_timeout_ms (then SQLSTATE 55P03), and puts the caller's
-- lock_timeout back.
CREATE FUNCTION idem_key_lock_wait(p_hash integer, p_lock_timeout_ms bigint) RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
  saved text := current_setting('lock_timeout');
BEGIN
  PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
  PERFORM pg_advisory_xact_lock(1229212505, p_hash);
  PERFORM set_config('lock_timeout', saved, true);
END
$$;

-- Decides an acquire without writing: outcome 'A' (the caller may own the key: token, drawn now),
-- 'C' (completed: response), 'I' (in progress: deadline_ms) or 'M' (another fingerprint). A record
-- whose expires_at has passed counts as absent. The owner holds the key up to its deadline
-- inclusive.
--
-- The key's advisory lock (two-key form: class 'IDKY', then the key's hash; keys whose hashes
-- collide only wait for each other) and its record's row lock, if it has one, are held until the
-- transaction ends: nothing can change the key before the caller writes it, and the acquires of a
-- key run one after the other, so they draw their tokens in the order the key changes hands.
-- Forces synchronous_commit on for the transaction (see idem_key_durable).
CREATE FUNCTION idem_key_begin(
    p_scope text, p_key text, p_fingerprint bytea, p_lock_timeout_ms bigint,
    OUT outcome "char", OUT token bigint, OUT deadline_ms bigint, OUT response bytea)
LANGUAGE plpgsql
AS $$
DECLARE
  t timestamptz := statement_timestamp();
  h integer := hashtext(p_scope || E'\n' || p_key);
  r idem_keys%ROWTYPE;
BEGIN
  IF current_setting('synchronous_commit') = 'off' THEN
    PERFORM set_config('synchronous_commit', 'on', true);
  END IF;
  IF NOT pg_try_advisory_xact_lock(1229212505, h) THEN
    PERFORM idem_key_lock_wait(h, p_lock_timeout_ms);
  END IF;
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
  -- Absent, expired, or in progress past its owner's deadline (a takeover).
  outcome := 'A';
  token := nextval('idem_key_tokens');
END
$$;

-- The standard mode's acquire: idem_key_begin, and on 'A' the record in progress, committed with
-- the caller's statement: token, deadline now + p_timeout_ms, kept p_retention_ms after the
-- deadline (then after the completion).
CREATE FUNCTION idem_key_acquire(
    p_scope text, p_key text, p_fingerprint bytea,
    p_timeout_ms bigint, p_retention_ms bigint, p_lock_timeout_ms bigint,
    OUT outcome "char", OUT token bigint, OUT deadline_ms bigint, OUT response bytea)
LANGUAGE plpgsql
AS $$
DECLARE
  dl timestamptz := statement_timestamp() + p_timeout_ms * interval '1 millisecond';
  rt interval    := p_retention_ms * interval '1 millisecond';
BEGIN
  SELECT b.outcome, b.token, b.deadline_ms, b.response
    INTO outcome, token, deadline_ms, response
    FROM idem_key_begin(p_scope, p_key, p_fingerprint, p_lock_timeout_ms) b;
  IF outcome = 'A' THEN
    INSERT INTO idem_keys AS k (scope, key, fingerprint, state, token, deadline, retention, expires_at)
    VALUES (p_scope, p_key, p_fingerprint, 'in_progress', token, dl, rt, dl + rt)
    ON CONFLICT (scope, key) DO UPDATE
       SET fingerprint = EXCLUDED.fingerprint, state = 'in_progress', token = EXCLUDED.token,
           deadline = EXCLUDED.deadline, retention = EXCLUDED.retention, response = NULL,
           completed_at = NULL, expires_at = EXCLUDED.expires_at;
    deadline_ms := idem_key_ms(dl);
  END IF;
END
$$;

-- The transactional mode's completion, in the transaction whose idem_key_begin answered 'A' with
-- p_token (and so holds the key's locks): writes the record completed (replacing an expired one,
-- or the one taken over). Raises SQLSTATE IDK01 if the record holds a greater token: the locks
-- were let go early (the caller's transaction ended in between) and someone else owns the key.
-- Raising, not answering, so that a COMMIT sent behind it in the same round trip cannot commit.
CREATE FUNCTION idem_key_finish(
    p_scope text, p_key text, p_fingerprint bytea, p_token bigint, p_response bytea,
    p_retention_ms bigint)
RETURNS void
LANGUAGE plpgsql
AS $$
DECLARE
  t  timestamptz := statement_timestamp();
  rt interval    := p_retention_ms * interval '1 millisecond';
BEGIN
  INSERT INTO idem_keys AS k
         (scope, key, fingerprint, state, token, deadline, retention, response, completed_at,
          expires_at)
  VALUES (p_scope, p_key, p_fingerprint, 'completed', p_token, t, rt, p_response, t, t + rt)
  ON CONFLICT (scope, key) DO UPDATE
     SET fingerprint = EXCLUDED.fingerprint, state = 'completed', token = EXCLUDED.token,
         deadline = EXCLUDED.deadline, retention = EXCLUDED.retention,
         response = EXCLUDED.response, completed_at = EXCLUDED.completed_at,
         expires_at = EXCLUDED.expires_at
   WHERE k.token < EXCLUDED.token;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'the key %/% changed hands: token % no longer owns it', p_scope, p_key, p_token
      USING ERRCODE = 'IDK01';
  END IF;
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
  PERFORM idem_key_durable();
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
  PERFORM idem_key_durable();
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
  PERFORM idem_key_durable();
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
