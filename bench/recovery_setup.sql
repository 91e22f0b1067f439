-- bench/recovery_setup.sql: the contenders of bench/recovery.sh, loaded
-- into one database per variant, with psql variables version (the
-- extension's SQL version) and stalled_index (on or off: the partial index a
-- stalled-claim scan would use).
--
--   bench_ext(k, amount)     begin, the business INSERT and finish, as
--                            bench/registry.sh's bench_ext: the hot path
--   bench_finish(k, amount, attempt)
--                            the business INSERT and finish of a claim taken
--                            in an earlier transaction
--   bench_steps              the hand-written bookkeeping of steps: one row
--                            per request, upserted at each step
CREATE EXTENSION idempotency VERSION :'version';

\if :stalled_index
CREATE INDEX registry_stalled ON idempotency.registry (lease_until)
	WHERE status = 'processing';
\endif

CREATE TABLE bench_charges (key text PRIMARY KEY, amount int NOT NULL);

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
	INSERT INTO bench_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k, result, attempt => b.attempt);
	RETURN result;
END $$;

CREATE FUNCTION bench_finish(k text, amount int, attempt int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	result jsonb := jsonb_build_object('charged', amount);
	status text;
BEGIN
	INSERT INTO bench_charges VALUES (k, amount);
	status := idempotency.idempotent_finish(k, result, attempt => attempt);
	RETURN result;
END $$;

-- the steps a handler records by hand: what it would write without
-- recovery points (a table of its own, keyed like the registry, unfenced)
CREATE TABLE bench_steps (
	key text PRIMARY KEY,
	recovery_point text NOT NULL,
	recovery_state jsonb,
	updated_at timestamptz NOT NULL
) WITH (fillfactor = 80);
