--
-- Hostile set-up: objects planted before CREATE EXTENSION, in public and in
-- the caller's search_path, are never called by the extension.
--
DROP EXTENSION idempotency;

CREATE TABLE planted_calls (what text);
GRANT INSERT ON planted_calls TO PUBLIC;

-- look-alikes of what the install script and the functions use
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES ('now'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.texteq_planted(text, text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES ('text ='); RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.texteq_planted);
CREATE FUNCTION public.tsle_planted(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES ('timestamptz <='); RETURN $1 OPERATOR(pg_catalog.<=) $2; END $$;
CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.tsle_planted);
CREATE FUNCTION public.pg_extension_config_dump(regclass, text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES ('pg_extension_config_dump'); END $$;
CREATE FUNCTION public.format(text, VARIADIC text[]) RETURNS text LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES ('format'); RETURN 'SELECT 1'; END $$;
CREATE FUNCTION public.int4pl_planted(int, int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES ('int +'); RETURN $1 OPERATOR(pg_catalog.+) $2; END $$;
CREATE OPERATOR public.+ (LEFTARG = int, RIGHTARG = int, FUNCTION = public.int4pl_planted);

-- a search_path that puts public before pg_catalog, as an attacker would like
SET search_path = public, pg_catalog;
-- the traps work: unqualified names do reach them
SELECT 'x'::text = 'x'::text AS eq, now() <= now() AS le, 1 + 1 AS two, format('%s', 'x');
SELECT what FROM planted_calls ORDER BY what;
TRUNCATE planted_calls;
CREATE EXTENSION idempotency;
SELECT * FROM planted_calls;

-- every code path of the API, under the same search_path
CREATE ROLE regress_hostile_user;
SELECT idempotency.grant_usage('regress_hostile_user');
SET ROLE regress_hostile_user;
SELECT outcome, attempt AS h1 FROM idempotency.idempotent_begin('h1', request => '{"a": 1}') \gset
SELECT outcome FROM idempotency.idempotent_begin('h1', request => '{"a": 1}');
SELECT outcome FROM idempotency.idempotent_begin('h1', wait => false);
SELECT idempotency.idempotent_finish('h1', '{"ok": 1}', attempt => :h1);
SELECT outcome FROM idempotency.idempotent_begin('h1');
SELECT idempotency.idempotent_finish('h1', '{}');
SELECT outcome, attempt AS h2 FROM idempotency.idempotent_begin('h2') \gset
SELECT idempotency.idempotent_abandon('h2', attempt => :h2);
SELECT idempotency.idempotent_abandon('h2');
SELECT key, status, expired FROM idempotency.my_records ORDER BY key;
RESET ROLE;
-- lease take-over and expiry paths
UPDATE idempotency.registry SET lease_until = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute', status = 'processing'
 WHERE key OPERATOR(pg_catalog.=) 'h1';
SET ROLE regress_hostile_user;
SELECT outcome, attempt > :h1 AS newer, attempt AS h1b FROM idempotency.idempotent_begin('h1') \gset
\echo :outcome :newer
SELECT idempotency.idempotent_finish('h1', '{"taken over": true}', attempt => :h1b);
RESET ROLE;
UPDATE idempotency.registry SET expires_at = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute'
 WHERE key OPERATOR(pg_catalog.=) 'h1';
SET ROLE regress_hostile_user;
SELECT outcome, attempt > :h1b AS newer FROM idempotency.idempotent_begin('h1');
RESET ROLE;

-- a temporary schema's look-alikes are not used either
CREATE TEMP TABLE registry (owner text, scope text, key text);
SET search_path = pg_temp, public, pg_catalog;
SET ROLE regress_hostile_user;
SELECT outcome FROM idempotency.idempotent_begin('h3');
RESET ROLE;
SELECT count(*) AS temp_rows FROM pg_temp.registry;

SELECT * FROM planted_calls;

RESET search_path;
DROP TABLE pg_temp.registry;
TRUNCATE idempotency.registry;
DROP OWNED BY regress_hostile_user;
DROP ROLE regress_hostile_user;
DROP OPERATOR public.= (text, text);
DROP OPERATOR public.<= (timestamptz, timestamptz);
DROP OPERATOR public.+ (int, int);
DROP FUNCTION public.now(), public.texteq_planted(text, text), public.tsle_planted(timestamptz, timestamptz),
	public.pg_extension_config_dump(regclass, text), public.format(text, VARIADIC text[]),
	public.int4pl_planted(int, int);
DROP TABLE planted_calls;
