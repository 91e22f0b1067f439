-- bench/citus_bench.sql: what bench/citus.sh sets up on the Citus
-- coordinator (psql variable replay_keys): an application role, the
-- extension's request and the same request written by hand, sent as
-- statements and handed over to the key's worker.

CREATE ROLE app LOGIN;
SELECT idempotency.grant_usage('app');

-- the extension's request: the business table distributed by the key,
-- co-located with the registry (doc/scaling-out.md)
CREATE TABLE bench_charges (key idempotency.key PRIMARY KEY, amount int NOT NULL);
SELECT create_distributed_table('bench_charges', 'key', colocate_with => 'idempotency.registry');
GRANT SELECT, INSERT ON bench_charges TO app;

-- the README's handler: claim, business write, result
CREATE FUNCTION bench_pay(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
	status text;
BEGIN
	b := idempotency.idempotent_begin(k);
	IF b.outcome <> 'execute' THEN
		RETURN b.response;
	END IF;
	INSERT INTO bench_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k, result, attempt => b.attempt);
	RETURN result;
END $$;

-- by hand: a keys table of the application's own, distributed by the key
-- and co-located with the business table; claim with INSERT ... ON
-- CONFLICT, replay the stored response, store it after the business write
CREATE TABLE hand_keys (key text PRIMARY KEY, status text NOT NULL, response jsonb,
						created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE hand_charges (key text PRIMARY KEY, amount int NOT NULL);
SELECT create_distributed_table('hand_keys', 'key', colocate_with => 'none');
SELECT create_distributed_table('hand_charges', 'key', colocate_with => 'hand_keys');
GRANT SELECT, INSERT, UPDATE ON hand_keys, hand_charges TO app;

CREATE FUNCTION hand_pay(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	claimed text;
	result jsonb;
BEGIN
	INSERT INTO hand_keys (key, status) VALUES (k, 'processing')
		ON CONFLICT (key) DO NOTHING RETURNING key INTO claimed;
	IF claimed IS NULL THEN
		SELECT h.response INTO result FROM hand_keys AS h WHERE h.key = k;
		RETURN result;
	END IF;
	INSERT INTO hand_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	UPDATE hand_keys SET status = 'completed', response = result WHERE key = k;
	RETURN result;
END $$;

-- by hand, handed over: the same statements as hand_pay's, in two PL/pgSQL
-- functions distributed with force_delegation, co-located with their own
-- tables: what handing a call to the key's worker costs by itself.  Citus
-- hands a call over only from a FROM clause: a call in a PL/pgSQL
-- expression (claim := deleg_claim(k), PERFORM deleg_store(...)) runs on
-- the coordinator.  bench/citus.sh checks where they ran.
CREATE TABLE deleg_keys (key text PRIMARY KEY, status text NOT NULL, response jsonb,
						 created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE deleg_charges (key text PRIMARY KEY, amount int NOT NULL);
SELECT create_distributed_table('deleg_keys', 'key', colocate_with => 'none');
SELECT create_distributed_table('deleg_charges', 'key', colocate_with => 'deleg_keys');
GRANT SELECT, INSERT, UPDATE ON deleg_keys, deleg_charges TO app;

CREATE FUNCTION deleg_claim(k text) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	claimed text;
BEGIN
	INSERT INTO deleg_keys (key, status) VALUES (k, 'processing')
		ON CONFLICT (key) DO NOTHING RETURNING key INTO claimed;
	IF claimed IS NULL THEN
		RETURN jsonb_build_object('claimed', false,
								  'response', (SELECT d.response FROM deleg_keys AS d WHERE d.key = k));
	END IF;
	RETURN jsonb_build_object('claimed', true);
END $$;
CREATE FUNCTION deleg_store(k text, result jsonb) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
BEGIN
	UPDATE deleg_keys SET status = 'completed', response = result WHERE key = k;
END $$;
SELECT create_distributed_function('deleg_claim(text)', 'k', colocate_with => 'deleg_keys',
								   force_delegation => true);
SELECT create_distributed_function('deleg_store(text, jsonb)', 'k', colocate_with => 'deleg_keys',
								   force_delegation => true);

CREATE FUNCTION deleg_pay(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	claim jsonb;
	result jsonb;
BEGIN
	SELECT c INTO claim FROM deleg_claim(k) AS c;
	IF NOT (claim->>'claimed')::boolean THEN
		RETURN claim->'response';
	END IF;
	INSERT INTO deleg_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	PERFORM FROM deleg_store(k, result);
	RETURN result;
END $$;

-- the whole handler handed over: bench_pay and hand_pay again, distributed
-- by the key with force_delegation, each in its tables' co-location group;
-- the call runs on the key's worker, and its statements there
CREATE FUNCTION bench_pay_w(k idempotency.key, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	b record;
	result jsonb;
	status text;
BEGIN
	b := idempotency.idempotent_begin(k::text);
	IF b.outcome <> 'execute' THEN
		RETURN b.response;
	END IF;
	INSERT INTO bench_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	status := idempotency.idempotent_finish(k::text, result, attempt => b.attempt);
	RETURN result;
END $$;
CREATE FUNCTION hand_pay_w(k text, amount int) RETURNS jsonb
LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
DECLARE
	claimed text;
	result jsonb;
BEGIN
	INSERT INTO hand_keys (key, status) VALUES (k, 'processing')
		ON CONFLICT (key) DO NOTHING RETURNING key INTO claimed;
	IF claimed IS NULL THEN
		SELECT h.response INTO result FROM hand_keys AS h WHERE h.key = k;
		RETURN result;
	END IF;
	INSERT INTO hand_charges VALUES (k, amount);
	result := jsonb_build_object('charged', amount);
	UPDATE hand_keys SET status = 'completed', response = result WHERE key = k;
	RETURN result;
END $$;
SELECT create_distributed_function('bench_pay_w(idempotency.key, int)', 'k',
								   colocate_with => 'idempotency.registry', force_delegation => true);
SELECT create_distributed_function('hand_pay_w(text, int)', 'k', colocate_with => 'hand_keys',
								   force_delegation => true);

GRANT EXECUTE ON FUNCTION bench_pay(text, int), hand_pay(text, int), deleg_pay(text, int),
	deleg_claim(text), deleg_store(text, jsonb), bench_pay_w(idempotency.key, int),
	hand_pay_w(text, int) TO app;

-- completed keys for the replay paths: r1 .. r<replay_keys>
SET ROLE app;
SELECT count(bench_pay('r' || i, i)) FROM generate_series(1, :replay_keys) AS i;
SELECT count(hand_pay('r' || i, i)) FROM generate_series(1, :replay_keys) AS i;
SELECT count(deleg_pay('r' || i, i)) FROM generate_series(1, :replay_keys) AS i;
RESET ROLE;
VACUUM ANALYZE;
