-- bench/citus_bench.sql: what bench/citus.sh runs, on the single server and
-- on the Citus coordinator (psql variables distribute and replay_keys).

-- the business write, distributed by its key under Citus, in a co-location
-- group of its own (doc/scaling-out.md)
CREATE TABLE bench_charges (key text PRIMARY KEY, amount int NOT NULL);
\if :distribute
SELECT create_distributed_table('bench_charges', 'key', colocate_with => 'none');
\endif

-- the handler of doc/idempotency-keys.md: claim, business write, result
CREATE FUNCTION bench_pay(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
	status text;
BEGIN
	b := idempotency.idempotent_begin(k::idempotency.key);
	IF b.outcome <> 'execute' THEN
		RETURN b.response;
	END IF;
	INSERT INTO bench_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k::idempotency.key, result, attempt => b.attempt);
	RETURN result;
END $$;

-- completed keys for the replay paths: r1 .. r<replay_keys>
SELECT count(bench_pay('r' || i, i)) FROM generate_series(1, :replay_keys) AS i;
VACUUM ANALYZE;
