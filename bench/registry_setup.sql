-- bench/registry_setup.sql: the contenders of bench/registry.sh, each one
-- server-side call per request, each protecting the same business write (a
-- row in its own copy of a charges table) and answering the same jsonb.
--
--   bench_bare   the business INSERT alone, no protection
--   bench_floor  the business INSERT plus one speculative insert of a
--                finished key row: what any design that writes one key row
--                per request costs at least (not a correct handler)
--   bench_hand   the minimal hand-written handler: keys table, INSERT ... ON
--                CONFLICT DO NOTHING, business INSERT, UPDATE with the answer
--   bench_feq    the feature-equivalent hand-written handler: what a careful
--                team writes to get what the extension gives (see below)
--   bench_feq_tuned  the same on a table designed like the extension's
--   bench_feq_fn the same factored into begin and finish functions
--   bench_ext    the extension, default mode, written as doc/idempotency-keys.md shows
--   bench_defer  the extension with defer_claim => true
--   bench_reg_min    the minimal handler's statements, by hand, on the
--                extension's own registry table (all its columns filled)
--   bench_reg_defer  the deferred design's statements, by hand, on it
--
-- bench/cleanup.sh uses bench_ext too.
CREATE EXTENSION idempotency;

-- the business write they all protect
CREATE TABLE bench_charges_bare (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_floor (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_hand (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_feq (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_feq_tuned (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_feq_fn (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_ext (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_defer (key text PRIMARY KEY, amount int NOT NULL);

CREATE FUNCTION bench_bare(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
	INSERT INTO bench_charges_bare VALUES (k, amount);
	RETURN jsonb_build_object('charged', amount);
END $$;

-- the floor: one speculative insert of a complete, finished key row, then the
-- business write; no read, no second write of the key row.  It does not
-- handle a repeat (the answer is not returned), so it is a cost, not a design.
CREATE TABLE bench_floor_keys (
	key text PRIMARY KEY,
	status text NOT NULL,
	response jsonb,
	created_at timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL
);

CREATE FUNCTION bench_floor(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	result jsonb := jsonb_build_object('charged', amount);
BEGIN
	INSERT INTO bench_floor_keys (key, status, response, expires_at)
	VALUES (k, 'completed', result, now() + interval '24 hours')
	ON CONFLICT (key) DO NOTHING;
	INSERT INTO bench_charges_floor VALUES (k, amount);
	RETURN result;
END $$;

-- the minimal hand-written handler: a keys table, INSERT ... ON CONFLICT DO
-- NOTHING, the business write, then UPDATE with the response.  No owner, no
-- request check, no lease (a crashed worker's claim is never taken over),
-- nothing reads expires_at.
CREATE TABLE bench_hand_keys (
	key text PRIMARY KEY,
	status text NOT NULL,
	response jsonb,
	created_at timestamptz NOT NULL DEFAULT now(),
	expires_at timestamptz NOT NULL
);

CREATE FUNCTION bench_hand(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	claimed text;
	result jsonb;
BEGIN
	INSERT INTO bench_hand_keys (key, status, expires_at)
	VALUES (k, 'processing', now() + interval '24 hours')
	ON CONFLICT (key) DO NOTHING
	RETURNING key INTO claimed;
	IF claimed IS NULL THEN
		SELECT response INTO result FROM bench_hand_keys WHERE key = k;
		RETURN result;
	END IF;
	INSERT INTO bench_charges_hand VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	UPDATE bench_hand_keys SET status = 'completed', response = result WHERE key = k;
	RETURN result;
END $$;

/*
 * The feature-equivalent hand-written handler: the well-known "idempotency
 * keys in Postgres" design, with what the extension gives in default mode:
 *
 *   - records per (owner = current_user, scope, key), so that two roles
 *     never see each other's keys;
 *   - a fingerprint of the request (SHA-256 of the jsonb's text), and reusing
 *     a key with a different request is an error;
 *   - status processing -> completed; the stored answer replayed to retries;
 *   - attempt, a fencing number that grows with every claim of the key, and a
 *     finish that only succeeds for the attempt that holds the claim;
 *   - a lease: a claim whose worker died (its lease ran out) is taken over by
 *     the next request, with a new attempt; a live one answers "in progress";
 *   - expires_at with a btree index, for a cleanup that deletes the oldest
 *     expired records first; an expired record counts as absent and is
 *     reclaimed in place by the next request;
 *   - a concurrent duplicate waits for the first transaction (ON CONFLICT
 *     does) and replays its answer; a record that changes under us (reclaimed
 *     or taken over by someone else, deleted by the cleanup) is read again.
 *
 * The handler is inlined, which is the fastest way to write it (a team with
 * more than one handler would rather put begin and finish into functions of
 * their own, as bench_feq_fn below does).  Its table is what such a team writes: a primary key (owner, scope, key),
 * text in the database's collation, the default fill factor.
 * bench_feq_tuned runs the same code on a table with the extension
 * registry's physical design (primary key leading with key, owner and scope
 * in the "C" collation, fillfactor 80 so that the finish is a HOT update),
 * to show how much of the difference is table design a team could copy.
 */
CREATE TABLE bench_feq_keys (
	owner text NOT NULL,
	scope text NOT NULL,
	key text NOT NULL,
	status text NOT NULL,
	attempt int NOT NULL,
	fingerprint bytea,
	response jsonb,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	lease_until timestamptz,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (owner, scope, key)
);

CREATE INDEX bench_feq_keys_expires_at ON bench_feq_keys (expires_at);

CREATE TABLE bench_feq_tuned_keys (
	owner text COLLATE "C" NOT NULL,
	scope text COLLATE "C" NOT NULL,
	key text NOT NULL,
	status text NOT NULL,
	attempt int NOT NULL,
	fingerprint bytea,
	response jsonb,
	created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL,
	lease_until timestamptz,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (key, scope, owner)
) WITH (fillfactor = 80);

CREATE INDEX bench_feq_tuned_keys_expires_at ON bench_feq_tuned_keys (expires_at);

CREATE FUNCTION bench_feq(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	sc CONSTANT text := '';
	lease CONSTANT interval := '5 minutes';
	ttl CONSTANT interval := '24 hours';
	me text := current_user;
	ts timestamptz := now();
	req jsonb := jsonb_build_object('amount', amount);
	fp bytea := sha256(convert_to(req::text, 'UTF8'));
	rec record;
	att int;
	result jsonb;
BEGIN
	-- claim: at most a few rounds, when the record keeps changing under us
	FOR tries IN 1 .. 10 LOOP
		-- a new key: insert the claim (waits for a concurrent one to end)
		INSERT INTO bench_feq_keys AS t
			(owner, scope, key, status, attempt, fingerprint, response,
			 created_at, updated_at, lease_until, expires_at)
		VALUES (me, sc, k, 'processing', 1, fp, NULL, ts, ts, ts + lease, ts + ttl)
		ON CONFLICT ON CONSTRAINT bench_feq_keys_pkey DO NOTHING
		RETURNING t.attempt INTO att;
		EXIT WHEN att IS NOT NULL;

		SELECT t.status, t.attempt, t.fingerprint, t.response, t.lease_until, t.expires_at
		  INTO rec
		  FROM bench_feq_keys AS t
		 WHERE t.key = k AND t.scope = sc AND t.owner = me;
		CONTINUE WHEN NOT FOUND;		-- deleted by the cleanup meanwhile

		IF rec.expires_at <= ts THEN
			-- expired: counts as absent; reclaim it, unless someone else did
			UPDATE bench_feq_keys AS t
			   SET status = 'processing', attempt = t.attempt + 1, fingerprint = fp,
				   response = NULL, created_at = ts, updated_at = ts,
				   lease_until = ts + lease, expires_at = ts + ttl
			 WHERE t.key = k AND t.scope = sc AND t.owner = me
			   AND t.expires_at <= ts
			RETURNING t.attempt INTO att;
			EXIT WHEN att IS NOT NULL;
			CONTINUE;
		END IF;

		IF rec.fingerprint <> fp THEN
			RAISE EXCEPTION 'idempotency key "%" was already used for a different request', k
				USING ERRCODE = '22023';
		END IF;

		IF rec.status <> 'processing' THEN
			RETURN rec.response;						-- replay
		ELSIF rec.lease_until > ts THEN
			RETURN '{"status": "in progress"}';		-- another worker holds it
		END IF;

		-- the lease ran out (its worker died): take over, with a new attempt
		UPDATE bench_feq_keys AS t
		   SET attempt = t.attempt + 1, updated_at = ts, lease_until = ts + lease
		 WHERE t.key = k AND t.scope = sc AND t.owner = me
		   AND t.status = 'processing' AND t.lease_until <= ts AND t.expires_at > ts
		RETURNING t.attempt INTO att;
		EXIT WHEN att IS NOT NULL;
	END LOOP;
	IF att IS NULL THEN
		RAISE EXCEPTION 'could not claim idempotency key "%"', k
			USING ERRCODE = '40001', DETAIL = 'Its record kept changing.';
	END IF;

	-- the work, once
	INSERT INTO bench_charges_feq VALUES (k, amount);
	result := jsonb_build_object('charged', amount);

	-- finish: only the attempt that holds the claim may store the answer
	UPDATE bench_feq_keys AS t
	   SET status = 'completed', response = result, updated_at = ts, lease_until = NULL
	 WHERE t.key = k AND t.scope = sc AND t.owner = me
	   AND t.status = 'processing' AND t.attempt = att AND t.expires_at > ts;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'the claim of idempotency key "%" was taken over', k
			USING ERRCODE = '40001';
	END IF;
	RETURN result;
END $$;

-- the same code on the tuned table
DO $$
DECLARE
	def text := pg_get_functiondef('bench_feq(text, int)'::regprocedure);
	tuned text := replace(replace(replace(def,
		'bench_feq(', 'bench_feq_tuned('),
		'bench_feq_keys', 'bench_feq_tuned_keys'),
		'bench_charges_feq', 'bench_charges_feq_tuned');
BEGIN
	IF pg_catalog.strpos(tuned, 'bench_feq_keys') > 0 OR pg_catalog.strpos(tuned, 'bench_feq_tuned(') = 0 THEN
		RAISE EXCEPTION 'could not derive bench_feq_tuned from bench_feq';
	END IF;
	EXECUTE tuned;
END $$;

/*
 * The same, factored the way a team that has more than one handler would
 * write it, and the way the extension's API is shaped: a begin function
 * (outcome, response, attempt) and a finish function, called by the
 * handler.  Same table design as bench_feq_keys.
 */
CREATE TABLE bench_feq_fn_keys (LIKE bench_feq_keys INCLUDING ALL);

CREATE FUNCTION bench_feq_begin(k text, sc text, request jsonb,
								OUT outcome text, OUT response jsonb, OUT attempt int)
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	lease CONSTANT interval := '5 minutes';
	ttl CONSTANT interval := '24 hours';
	me text := current_user;
	ts timestamptz := now();
	fp bytea := sha256(convert_to(request::text, 'UTF8'));
	rec record;
	att int;
BEGIN
	FOR tries IN 1 .. 10 LOOP
		INSERT INTO bench_feq_fn_keys AS t
			(owner, scope, key, status, attempt, fingerprint, response,
			 created_at, updated_at, lease_until, expires_at)
		VALUES (me, sc, k, 'processing', 1, fp, NULL, ts, ts, ts + lease, ts + ttl)
		ON CONFLICT ON CONSTRAINT bench_feq_fn_keys_pkey DO NOTHING
		RETURNING t.attempt INTO att;
		EXIT WHEN att IS NOT NULL;

		SELECT t.status, t.attempt, t.fingerprint, t.response, t.lease_until, t.expires_at
		  INTO rec
		  FROM bench_feq_fn_keys AS t
		 WHERE t.key = k AND t.scope = sc AND t.owner = me;
		CONTINUE WHEN NOT FOUND;

		IF rec.expires_at <= ts THEN
			UPDATE bench_feq_fn_keys AS t
			   SET status = 'processing', attempt = t.attempt + 1, fingerprint = fp,
				   response = NULL, created_at = ts, updated_at = ts,
				   lease_until = ts + lease, expires_at = ts + ttl
			 WHERE t.key = k AND t.scope = sc AND t.owner = me
			   AND t.expires_at <= ts
			RETURNING t.attempt INTO att;
			EXIT WHEN att IS NOT NULL;
			CONTINUE;
		END IF;

		IF rec.fingerprint <> fp THEN
			RAISE EXCEPTION 'idempotency key "%" was already used for a different request', k
				USING ERRCODE = '22023';
		END IF;

		IF rec.status <> 'processing' THEN
			outcome := 'replay';
			response := rec.response;
			RETURN;
		ELSIF rec.lease_until > ts THEN
			outcome := 'in_progress';
			RETURN;
		END IF;

		UPDATE bench_feq_fn_keys AS t
		   SET attempt = t.attempt + 1, updated_at = ts, lease_until = ts + lease
		 WHERE t.key = k AND t.scope = sc AND t.owner = me
		   AND t.status = 'processing' AND t.lease_until <= ts AND t.expires_at > ts
		RETURNING t.attempt INTO att;
		EXIT WHEN att IS NOT NULL;
	END LOOP;
	IF att IS NULL THEN
		RAISE EXCEPTION 'could not claim idempotency key "%"', k
			USING ERRCODE = '40001', DETAIL = 'Its record kept changing.';
	END IF;
	outcome := 'execute';
	attempt := att;
END $$;

-- owner is compared with a text variable: compared with current_user itself
-- (type name, collation "C") the condition does not match the primary key's
-- collation, and the UPDATE becomes a sequential scan
CREATE FUNCTION bench_feq_finish(k text, sc text, result jsonb, att int) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	me text := current_user;
	ts timestamptz := now();
BEGIN
	UPDATE bench_feq_fn_keys AS t
	   SET status = 'completed', response = result, updated_at = ts, lease_until = NULL
	 WHERE t.key = k AND t.scope = sc AND t.owner = me
	   AND t.status = 'processing' AND t.attempt = att AND t.expires_at > ts;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'the claim of idempotency key "%" was taken over', k
			USING ERRCODE = '40001';
	END IF;
END $$;

CREATE FUNCTION bench_feq_fn(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
BEGIN
	b := bench_feq_begin(k, '', jsonb_build_object('amount', amount));
	IF b.outcome = 'replay' THEN
		RETURN b.response;
	ELSIF b.outcome = 'in_progress' THEN
		RETURN '{"status": "in progress"}';
	END IF;
	INSERT INTO bench_charges_feq_fn VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	PERFORM bench_feq_finish(k, '', result, b.attempt);
	RETURN result;
END $$;

-- the extension, written as doc/idempotency-keys.md shows it: begin and finish as
-- assignments, the key passed as text, the request fingerprinted
CREATE FUNCTION bench_ext(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
	status text;
BEGIN
	b := idempotency.idempotent_begin(k, request => jsonb_build_object('amount', amount));
	IF b.outcome = 'replay' THEN
		RETURN b.response;
	ELSIF b.outcome = 'in_progress' THEN
		RETURN '{"status": "in progress"}';
	END IF;
	INSERT INTO bench_charges_ext VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k, result, attempt => b.attempt);
	RETURN result;
END $$;

-- the same with defer_claim: begin only reads, finish writes the record once
CREATE FUNCTION bench_defer(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
	status text;
BEGIN
	b := idempotency.idempotent_begin(k, request => jsonb_build_object('amount', amount),
									  defer_claim => true);
	IF b.outcome = 'replay' THEN
		RETURN b.response;
	ELSIF b.outcome = 'in_progress' THEN
		RETURN '{"status": "in progress"}';
	END IF;
	INSERT INTO bench_charges_defer VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k, result, attempt => b.attempt);
	RETURN result;
END $$;

/*
 * The table's share.  The extension's registry row is wider than the
 * minimal handler's keys row (owner, scope, attempt, fingerprint, lease and
 * timestamps), its primary key has three columns (key, scope, owner: a role
 * never meets another role's key), and its key column is of the key type.
 * These two run the fewest statements that write such rows, by hand, with
 * none of the extension's checks: the minimal handler's claim, business
 * write and UPDATE (bench_reg_min), and the deferred design's read,
 * business write and one INSERT (bench_reg_defer).  What the extension's
 * modes reach against these is what its code costs; what these reach
 * against the minimal handler is what the table costs.  They write the
 * registry as its owner would (the benchmark runs as a superuser), under
 * keys no other variant uses.
 */
CREATE TABLE bench_charges_reg_min (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_reg_defer (key text PRIMARY KEY, amount int NOT NULL);

CREATE FUNCTION bench_reg_min(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	me text := current_user;
	ts timestamptz := now();
	fp bytea := sha256(convert_to(jsonb_build_object('amount', amount)::text, 'UTF8'));
	claimed int;
	result jsonb;
BEGIN
	INSERT INTO idempotency.registry AS r
		(owner, scope, key, status, attempt, fingerprint, response,
		 created_at, updated_at, lease_until, expires_at)
	VALUES (me, '', k::idempotency.key, 'processing', 1, fp, NULL, ts, ts,
			ts + interval '5 minutes', ts + interval '24 hours')
	ON CONFLICT (owner, scope, key) DO NOTHING
	RETURNING r.attempt INTO claimed;
	IF claimed IS NULL THEN
		SELECT r.response INTO result FROM idempotency.registry AS r
		 WHERE r.key = k::idempotency.key AND r.scope = '' AND r.owner = me;
		RETURN result;
	END IF;
	INSERT INTO bench_charges_reg_min VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	UPDATE idempotency.registry AS r
	   SET status = 'completed', response = result, updated_at = ts, lease_until = NULL
	 WHERE r.key = k::idempotency.key AND r.scope = '' AND r.owner = me;
	RETURN result;
END $$;

CREATE FUNCTION bench_reg_defer(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	me text := current_user;
	ts timestamptz := now();
	fp bytea := sha256(convert_to(jsonb_build_object('amount', amount)::text, 'UTF8'));
	result jsonb;
BEGIN
	SELECT r.response INTO result FROM idempotency.registry AS r
	 WHERE r.key = k::idempotency.key AND r.scope = '' AND r.owner = me;
	IF FOUND THEN
		RETURN result;
	END IF;
	INSERT INTO bench_charges_reg_defer VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	INSERT INTO idempotency.registry
		(owner, scope, key, status, attempt, fingerprint, response,
		 created_at, updated_at, lease_until, expires_at)
	VALUES (me, '', k::idempotency.key, 'completed', 1, fp, result, ts, ts,
			NULL, ts + interval '24 hours');
	RETURN result;
END $$;

-- completed keys for the replay path, made by each handler itself (with the
-- amount the replay script sends, so that the fingerprints match): r1 ..
-- r100000 for all but bench_defer, d1 .. d100000 for bench_defer (which
-- shares the registry with bench_ext), g1 .. g100000 for bench_reg_defer
SELECT count(bench_hand('r' || i, 1)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_feq('r' || i, 1)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_feq_tuned('r' || i, 1)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_feq_fn('r' || i, 1)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_ext('r' || i, 1)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_defer('d' || i, 1)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_reg_defer('g' || i, 1)) FROM generate_series(1, 100000) AS i;
VACUUM ANALYZE;
CHECKPOINT;
