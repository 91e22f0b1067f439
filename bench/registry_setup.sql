-- bench/registry_setup.sql: the two contenders, each one server-side call per
-- request.
CREATE EXTENSION idempotency;

-- the business write both of them protect
CREATE TABLE bench_charges_ext (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_hand (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE bench_charges_bare (key text PRIMARY KEY, amount int NOT NULL);

-- what a user writes by hand: a keys table, INSERT ... ON CONFLICT DO
-- NOTHING, the business write, then UPDATE with the response
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

-- the same handler on the extension
CREATE FUNCTION bench_ext(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
BEGIN
	-- an assignment, not SELECT ... FROM: PL/pgSQL evaluates it as a simple
	-- expression, without starting the executor
	b := idempotency.idempotent_begin(k::idempotency.key);
	IF b.outcome <> 'execute' THEN
		RETURN b.response;
	END IF;
	INSERT INTO bench_charges_ext VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	PERFORM idempotency.idempotent_finish(k::idempotency.key, result, attempt => b.attempt);
	RETURN result;
END $$;

-- the business write alone, no protection at all
CREATE FUNCTION bench_bare(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
	INSERT INTO bench_charges_bare VALUES (k, amount);
	RETURN jsonb_build_object('charged', amount);
END $$;

-- completed keys for the replay path: r1 .. r100000 in both
SELECT count(bench_hand('r' || i, i)) FROM generate_series(1, 100000) AS i;
SELECT count(bench_ext('r' || i, i)) FROM generate_series(1, 100000) AS i;
VACUUM ANALYZE;
CHECKPOINT;
