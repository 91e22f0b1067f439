-- bench/registry_table_setup.sql: one handler, by hand, on keys tables that
-- differ in one respect each, from the narrowest table that can hold an
-- answer to the extension's registry itself.  See bench/registry_table.sh.
--
-- The handler is the deferred design, the one with the fewest statements:
-- read the key's row (replay if there is one), the business INSERT, then one
-- plain INSERT of the finished row.  No checks: what is measured is what
-- each part of the table costs the statements that touch it.
--
--   narrow    key text PRIMARY KEY, status, response, created_at, expires_at
--   wide      the same primary key, and every other column of the registry
--             (owner, scope, attempt, fingerprint, status_code, body,
--             updated_at, lease_until), filled as the extension fills them
--   pk3       the narrow row with owner and scope, primary key (key, scope,
--             owner): a role never meets another role's key
--   keytype   the narrow table with key of type idempotency.key
--   ff80      the narrow table with fillfactor 80 (room for a HOT finish)
--   registry  the extension's registry: all of the above
CREATE EXTENSION idempotency;

CREATE TABLE keys_narrow (key text PRIMARY KEY, status text NOT NULL, response jsonb,
	created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE keys_wide (key text PRIMARY KEY,
	owner text COLLATE "C" NOT NULL, scope text COLLATE "C" NOT NULL,
	status text NOT NULL, attempt int NOT NULL, fingerprint bytea, response jsonb,
	status_code int, body bytea, created_at timestamptz NOT NULL,
	updated_at timestamptz NOT NULL, lease_until timestamptz, expires_at timestamptz NOT NULL);
CREATE TABLE keys_pk3 (key text NOT NULL,
	scope text COLLATE "C" NOT NULL, owner text COLLATE "C" NOT NULL,
	status text NOT NULL, response jsonb,
	created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL,
	PRIMARY KEY (key, scope, owner));
CREATE TABLE keys_keytype (key idempotency.key PRIMARY KEY, status text NOT NULL, response jsonb,
	created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL);
CREATE TABLE keys_ff80 (key text PRIMARY KEY, status text NOT NULL, response jsonb,
	created_at timestamptz NOT NULL, expires_at timestamptz NOT NULL) WITH (fillfactor = 80);

-- one handler per table, from one template: the WHERE clause, the columns
-- and the values are the only differences
DO $do$
DECLARE
	v record;
BEGIN
	FOR v IN
		SELECT * FROM (VALUES
			('narrow', 'keys_narrow', 't.key = k',
			 'key, status, response, created_at, expires_at',
			 $$k, 'completed', result, ts, ts + interval '24 hours'$$),
			('wide', 'keys_wide', 't.key = k',
			 'key, owner, scope, status, attempt, fingerprint, response, created_at, updated_at, lease_until, expires_at',
			 $$k, me, '', 'completed', 1, fp, result, ts, ts, NULL, ts + interval '24 hours'$$),
			('pk3', 'keys_pk3', $$t.key = k AND t.scope = '' AND t.owner = me$$,
			 'key, scope, owner, status, response, created_at, expires_at',
			 $$k, '', me, 'completed', result, ts, ts + interval '24 hours'$$),
			('keytype', 'keys_keytype', 't.key = k::idempotency.key',
			 'key, status, response, created_at, expires_at',
			 $$k::idempotency.key, 'completed', result, ts, ts + interval '24 hours'$$),
			('ff80', 'keys_ff80', 't.key = k',
			 'key, status, response, created_at, expires_at',
			 $$k, 'completed', result, ts, ts + interval '24 hours'$$),
			('registry', 'idempotency.registry',
			 $$t.key = k::idempotency.key AND t.scope = '' AND t.owner = me$$,
			 'owner, scope, key, status, attempt, fingerprint, response, created_at, updated_at, lease_until, expires_at',
			 $$me, '', k::idempotency.key, 'completed', 1, fp, result, ts, ts, NULL, ts + interval '24 hours'$$)
		) AS x(name, tab, cond, cols, vals)
	LOOP
		EXECUTE format('CREATE TABLE charges_%s (key text PRIMARY KEY, amount int NOT NULL)', v.name);
		EXECUTE format($f$
			CREATE FUNCTION bench_%1$s(k text, amount int) RETURNS jsonb
			LANGUAGE plpgsql SET search_path = pg_catalog, public AS $$
			DECLARE
				me CONSTANT text := 'bench';
				fp CONSTANT bytea := '\x02000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f';
				ts timestamptz := now();
				result jsonb;
			BEGIN
				SELECT t.response INTO result FROM %2$s AS t WHERE %3$s;
				IF FOUND THEN
					RETURN result;
				END IF;
				INSERT INTO charges_%1$s VALUES (k, amount);
				result := jsonb_build_object('charged', amount);
				INSERT INTO %2$s (%4$s) VALUES (%5$s);
				RETURN result;
			END $$$f$, v.name, v.tab, v.cond, v.cols, v.vals);
	END LOOP;
END $do$;

-- completed keys for the replay path: r1 .. r100000 in every table
SELECT count(bench_narrow('r' || i, 1)), count(bench_wide('r' || i, 1)),
	   count(bench_pk3('r' || i, 1)), count(bench_keytype('r' || i, 1)),
	   count(bench_ff80('r' || i, 1)), count(bench_registry('r' || i, 1))
  FROM generate_series(1, 100000) AS i;
VACUUM ANALYZE;
CHECKPOINT;
