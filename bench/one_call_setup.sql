-- bench/one_call_setup.sql: the tables and the handler of bench/one_call.py,
-- one charges table per client pattern, so that each writes the same row.
CREATE EXTENSION IF NOT EXISTS idempotency;
CREATE TABLE charges_redis (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE charges_three (key text PRIMARY KEY, amount int NOT NULL);
CREATE TABLE charges_call (key text PRIMARY KEY, amount int NOT NULL);

-- the handler idempotent_call runs: the business write and the answer
CREATE FUNCTION bench_pay(request jsonb) RETURNS jsonb
LANGUAGE sql SET search_path = pg_catalog, public AS $$
	INSERT INTO charges_call VALUES (request->>'key', (request->>'amount')::int)
	RETURNING jsonb_build_object('charged', amount)
$$;
