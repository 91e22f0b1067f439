--
-- Hostile installation.  Look-alikes planted before and after CREATE
-- EXTENSION, by a superuser and by a role that is not superuser but owns the
-- database (so it can create schemas, and owns public), in public, in
-- pg_temp, in a schema named idempotency and in a schema of its own, are
-- never called by the extension and never receive its data: each one writes
-- to planted_calls when it runs, or fails loudly.  CREATE EXTENSION refuses
-- a schema it did not create, and the extension's functions refuse to run
-- when the schema named idempotency is not their own.  The same against the
-- background worker: test/tap/006_hostile_install.pl.
--
DROP EXTENSION idempotency;
-- DROP EXTENSION takes the extension's schema with it
SELECT count(*) AS schemas_left FROM pg_namespace WHERE nspname = 'idempotency';

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

/*
 * plant(s): look-alikes in schema s of what the extension has and uses,
 * each created unless s already has one: its tables (with every column of
 * ours, and a trigger that logs any write), its views, a "key" domain that
 * logs every value cast to it, operators for text, timestamptz, int and the
 * type named idempotency.key (whoever's it is), core functions, and its own
 * functions, cleanup(integer) with an ALTER ROLE ... SUPERUSER payload.  Runs as the
 * caller, so the look-alikes are the caller's.
 */
CREATE FUNCTION public.planted(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.planted_calls VALUES (what); RETURN true; END $$;
CREATE FUNCTION public.planted_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM public.planted(TG_OP || ' on ' || TG_TABLE_NAME); RETURN NULL; END $$;
CREATE FUNCTION public.plant(s text) RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $plant$
DECLARE
	t text;
	def text[];
	-- operator, left, right, result type, returned value
	ops text[] := ARRAY[
		['=', 'text', 'text', 'boolean', 'true'],
		['<=', 'timestamptz', 'timestamptz', 'boolean', 'true'],
		['+', 'int', 'int', 'int', '2'],
		['=', 'idempotency.key', 'idempotency.key', 'boolean', 'true'],
		['=', 'idempotency.key', 'text', 'boolean', 'true'],
		['=', 'text', 'idempotency.key', 'boolean', 'true'],
		['>', 'text', 'text', 'boolean', 'true'],
		['+', 'bigint', 'int', 'bigint', '2']];
	-- function, arguments, result type, return statement
	funcs text[] := ARRAY[
		['cleanup', 'integer', 'bigint', 'RETURN 0'],
		['idempotent_begin', 'idempotency.key, text, jsonb, interval, interval, boolean, boolean', 'text', 'RETURN ''execute'''],
		['idempotent_finish', 'idempotency.key, jsonb, text, integer, boolean', 'void', 'RETURN'],
		['idempotent_abandon', 'idempotency.key, text, integer', 'void', 'RETURN'],
		['inbox_receive', 'text, text, interval', 'boolean', 'RETURN true'],
		['issue_token', 'text, interval', 'text', 'RETURN ''tk_planted'''],
		['consume_token', 'idempotency.key, text', 'boolean', 'RETURN true'],
		['outbox_send', 'text, jsonb, text, jsonb, text', 'text', 'RETURN ''planted'''],
		['outbox_fetch', 'integer, interval', 'SETOF text', 'RETURN'],
		['outbox_ack', 'bigint, text[], interval', 'bigint', 'RETURN 0'],
		['nextval', 'regclass', 'bigint', 'RETURN 1'],
		['key_eq', 'idempotency.key, idempotency.key', 'boolean', 'RETURN true'],
		['state_machines_changed', '', 'trigger', 'RETURN NULL'],
		['now', '', 'timestamptz', 'RETURN pg_catalog.now()'],
		['format', 'text, VARIADIC text[]', 'text', 'RETURN ''SELECT 1'''],
		['pg_extension_config_dump', 'regclass, text', 'void', 'RETURN'],
		['jsonb_build_object', 'text, text', 'jsonb', 'RETURN ''{}'''],
		['jsonb_populate_record', 'anyelement, jsonb', 'anyelement', 'RETURN $1'],
		['unnest', 'text[]', 'SETOF text', 'RETURN'],
		['to_regclass', 'text', 'regclass', 'RETURN NULL'],
		['has_table_privilege', 'regclass, text', 'boolean', 'RETURN true']];
BEGIN
	FOREACH t IN ARRAY ARRAY['registry', 'inbox', 'tokens', 'state_machines', 'state_history', 'outbox'] LOOP
		CONTINUE WHEN to_regclass(format('%I.%I', s, t)) IS NOT NULL;
		EXECUTE format('CREATE TABLE %I.%I (owner text, scope text, key text, status text, attempt int,
			fingerprint bytea, response jsonb, created_at timestamptz, updated_at timestamptz,
			lease_until timestamptz, expires_at timestamptz, consumer text, message_id text,
			received_at timestamptz, token text, issued_at timestamptz, consumed_at timestamptz,
			name text, transitions jsonb, initial text[], table_name text, row_key jsonb,
			from_state text, to_state text, changed_at timestamptz, xid xid8, role text,
			ordering_key text, seq bigint, topic text, payload jsonb, headers jsonb, sent_at timestamptz,
			deliveries int, delivered_at timestamptz)', s, t);
		EXECUTE format('CREATE TRIGGER planted BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON %I.%I
			FOR EACH STATEMENT EXECUTE FUNCTION public.planted_trigger()', s, t);
	END LOOP;
	FOREACH t IN ARRAY ARRAY['my_records', 'my_tokens', 'my_outbox', 'stats', 'cleanup_status'] LOOP
		CONTINUE WHEN to_regclass(format('%I.%I', s, t)) IS NOT NULL;
		EXECUTE format('CREATE VIEW %I.%I AS SELECT public.planted(%L) AS planted', s, t, 'view ' || t);
	END LOOP;
	IF to_regtype(format('%I.key', s)) IS NULL THEN
		EXECUTE format('CREATE DOMAIN %I.key AS text CHECK (public.planted(''domain key''))', s);
	END IF;
	FOREACH def SLICE 1 IN ARRAY ops LOOP
		CONTINUE WHEN to_regtype(def[2]) IS NULL OR to_regtype(def[3]) IS NULL;
		BEGIN
			EXECUTE format('CREATE FUNCTION %I.%I(%s, %s) RETURNS %s LANGUAGE plpgsql AS $f$
				BEGIN PERFORM public.planted(%L); RETURN %s; END $f$',
				s, 'op_' || md5(def::text || to_regtype(def[2])::oid), def[2], def[3], def[4],
				format('operator %s %s %s', def[2], def[1], def[3]), def[5]);
			EXECUTE format('CREATE OPERATOR %I.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = %I.%I)',
				s, def[1], def[2], def[3], s, 'op_' || md5(def::text || to_regtype(def[2])::oid));
		EXCEPTION WHEN duplicate_function OR duplicate_object THEN
			NULL;				-- s has it already
		END;
	END LOOP;
	FOREACH def SLICE 1 IN ARRAY funcs LOOP
		CONTINUE WHEN def[2] LIKE '%idempotency.key%' AND to_regtype('idempotency.key') IS NULL;
		BEGIN
			EXECUTE format('CREATE FUNCTION %I.%I(%s) RETURNS %s LANGUAGE plpgsql AS $f$
				BEGIN
					PERFORM public.planted(%L);
					IF %L = ''cleanup'' THEN
						ALTER ROLE regress_mallory SUPERUSER;
					END IF;
					%s;
				END $f$',
				s, def[1], def[2], def[3], format('function %s(%s)', def[1], def[2]), def[1], def[4]);
		EXCEPTION WHEN duplicate_function THEN
			NULL;
		END;
	END LOOP;
END
$plant$;

-- a search_path that puts public before pg_catalog, as an attacker would like
SET search_path = public, pg_catalog;
-- the traps work: unqualified names do reach them
SELECT 'x'::text = 'x'::text AS eq, now() <= now() AS le, 1 + 1 AS two, format('%s', 'x');
SELECT what FROM planted_calls ORDER BY what;
TRUNCATE planted_calls;

-- The attacker: not superuser, but owns the database.  Before CREATE
-- EXTENSION it takes the schema name and fills it, its own schema, pg_temp
-- (this session's) and public with look-alikes.
CREATE ROLE regress_mallory;
DO $$
BEGIN
	EXECUTE pg_catalog.format('ALTER DATABASE %I OWNER TO regress_mallory', pg_catalog.current_database());
END
$$;
SET ROLE regress_mallory;
CREATE SCHEMA idempotency;
CREATE SCHEMA mallory;
SELECT public.plant(s) FROM pg_catalog.unnest(ARRAY['idempotency', 'mallory', 'pg_temp', 'public']) AS s;
RESET ROLE;
-- CREATE EXTENSION refuses a schema that it did not create (the context
-- lines, which name the script's lines on PostgreSQL 18, are left out)
\set SHOW_CONTEXT never
CREATE EXTENSION idempotency;
\set SHOW_CONTEXT errors
SELECT count(*) AS members FROM pg_extension WHERE extname = 'idempotency';
-- once the name is free, it creates and owns its schema; nothing planted ran
SET ROLE regress_mallory;
ALTER SCHEMA idempotency RENAME TO mallory_old;
RESET ROLE;
-- the installing superuser's default privileges would apply to every object
-- (a reporting role's SELECT on the records and the secret, a revoke that
-- closes the key type's functions): refused, naming them, and nothing stays
ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO regress_mallory;
ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;
CREATE FUNCTION public.refusal(command text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	state text;
	message text;
	detail text;
BEGIN
	EXECUTE command;
	RETURN 'not refused';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
	-- the installing superuser's name differs from one test server to another, and
	-- the privileges' letters from one major version to another
	RETURN pg_catalog.replace(state || ' ' || message, current_user, 'INSTALLER')
		|| CASE WHEN detail LIKE '%for functions {%' AND detail LIKE '%regress_mallory=r/%'
				THEN ' (the detail names both)' ELSE ' detail: ' || detail END;
END
$$;
SELECT public.refusal('CREATE EXTENSION idempotency');
SELECT count(*) AS members FROM pg_extension WHERE extname = 'idempotency';
SELECT count(*) AS schemas FROM pg_namespace WHERE nspname = 'idempotency';
ALTER DEFAULT PRIVILEGES REVOKE SELECT ON TABLES FROM regress_mallory;
ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC;
CREATE EXTENSION idempotency;
SELECT * FROM planted_calls;
SELECT pg_get_userbyid(n.nspowner) = current_user AS owned_by_installer,
	   (SELECT count(*) FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		 WHERE e.extname = 'idempotency' AND d.classid = 'pg_namespace'::regclass
		   AND d.objid = n.oid AND d.deptype = 'e') AS member_of_extension
  FROM pg_namespace n WHERE n.nspname = 'idempotency';

-- After CREATE EXTENSION: more look-alikes, now for the real key type too
-- (operators = on key and on key against text, our functions' exact
-- signatures), in public, pg_temp and its own schema; and the schema and
-- its objects are out of the attacker's reach.
SET ROLE regress_mallory;
SELECT public.plant(s) FROM pg_catalog.unnest(ARRAY['mallory', 'pg_temp', 'public']) AS s;
ALTER SCHEMA idempotency RENAME TO idempotency_old;
DROP SCHEMA idempotency CASCADE;
CREATE SCHEMA idempotency;
CREATE FUNCTION idempotency.cleanup(bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint';
CREATE TABLE idempotency.planted (x int);
ALTER FUNCTION mallory.cleanup(integer) SET SCHEMA idempotency;
ALTER TABLE mallory.registry SET SCHEMA idempotency;
ALTER TABLE idempotency.registry RENAME TO registry_old;
ALTER FUNCTION idempotency.cleanup(integer) RENAME TO cleanup_old;
ALTER FUNCTION idempotency.cleanup(integer) OWNER TO regress_mallory;
ALTER EXTENSION idempotency UPDATE;
DROP EXTENSION idempotency;
RESET ROLE;

-- every code path of the API, under a search_path full of look-alikes
SET search_path = mallory, public, pg_catalog;
CREATE ROLE regress_hostile_user;
SELECT idempotency.grant_usage('regress_hostile_user');
SET ROLE regress_hostile_user;
SELECT outcome, attempt AS h1 FROM idempotency.idempotent_begin('h1', request => '{"a": 1}', external => true) \gset
SELECT outcome FROM idempotency.idempotent_begin('h1', request => '{"a": 1}', external => true);
SELECT outcome FROM idempotency.idempotent_begin('h1', request => '{"a": 1}', wait => false, external => true);
SELECT idempotency.idempotent_finish('h1', '{"ok": 1}', attempt => :h1);
SELECT outcome FROM idempotency.idempotent_begin('h1', request => '{"a": 1}', external => true);
SELECT idempotency.idempotent_finish('h1', '{}');
SELECT outcome, attempt AS h2 FROM idempotency.idempotent_begin('h2', external => true) \gset
SELECT idempotency.idempotent_abandon('h2', attempt => :h2);
SELECT idempotency.idempotent_abandon('h2');
SELECT key, status, expired FROM idempotency.my_records ORDER BY key;
RESET ROLE;
-- lease take-over and expiry paths
UPDATE idempotency.registry SET lease_until = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute', status = 'processing'
 WHERE key OPERATOR(pg_catalog.=) 'h1';
SET ROLE regress_hostile_user;
SELECT outcome, attempt > :h1 AS newer, attempt AS h1b FROM idempotency.idempotent_begin('h1', request => '{"a": 1}', external => true) \gset
\echo :outcome :newer
SELECT idempotency.idempotent_finish('h1', '{"taken over": true}', attempt => :h1b);
RESET ROLE;
UPDATE idempotency.registry SET expires_at = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute'
 WHERE key OPERATOR(pg_catalog.=) 'h1';
SET ROLE regress_hostile_user;
SELECT outcome, attempt > :h1b AS newer FROM idempotency.idempotent_begin('h1', request => '{"a": 1}', external => true);
-- the inbox, tokens and key locks
SELECT idempotency.inbox_receive('billing', 'm1'), idempotency.inbox_receive('billing', 'm1');
SELECT * FROM idempotency.inbox_receive_batch('billing', ARRAY['m1', 'm2', 'm3', 'm2']);
SELECT * FROM idempotency.inbox_receive_batch('billing', ARRAY['m4', 'm5']);
SELECT idempotency.consume_token(idempotency.issue_token('checkout'), 'checkout') AS consumed;
SELECT idempotency.consume_token('tk_00000000000000000000000000000000', 'checkout') AS forged;
SELECT outcome FROM idempotency.idempotent_begin('tk_00000000000000000000000000000000', require_token => true);
SELECT state, count(*) FROM idempotency.my_tokens GROUP BY state;
BEGIN;
SELECT idempotency.lock('h1'), idempotency.try_lock('h2');
COMMIT;
-- the outbox: send (with a key, and without), fetch, acknowledge, fetch the next
SELECT idempotency.outbox_send('orders', '{"n": 1}', 'o-key', '{"h": 1}', 'o1');
SELECT idempotency.outbox_send('orders', '{"n": 2}', 'o-key', message_id => 'o2');
SELECT idempotency.outbox_send('orders', '{"n": 3}') IS NOT NULL AS generated;
SELECT count(*) AS fetched FROM idempotency.outbox_fetch(10);
SELECT idempotency.outbox_ack(m.attempt, ARRAY[m.message_id]) AS acked
  FROM idempotency.my_outbox AS m WHERE m.message_id OPERATOR(pg_catalog.=) 'o1';
SELECT message_id FROM idempotency.outbox_fetch(10);
SELECT message_id, seq, state FROM idempotency.my_outbox
 WHERE ordering_key OPERATOR(pg_catalog.=) 'o-key' ORDER BY seq;
RESET ROLE;
-- state machines: the checker, its history and the functions around them
SELECT idempotency.define_state_machine('hostile_machine', '{"new": ["done"]}');
SELECT idempotency.define_state_machine('hostile_machine2', '{"new": ["done"]}');
CREATE TABLE public.hostile_orders (id int PRIMARY KEY, status text);
CREATE TRIGGER check_status BEFORE INSERT OR UPDATE ON public.hostile_orders
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('hostile_machine', 'status');
CREATE TRIGGER record_status AFTER INSERT OR UPDATE ON public.hostile_orders
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO public.hostile_orders VALUES (1, 'new');
UPDATE public.hostile_orders SET status = 'done';
UPDATE public.hostile_orders SET status = 'new';
SELECT idempotency.transition_allowed('hostile_machine', 'new', 'done');
SELECT * FROM idempotency.state_machine_transitions('hostile_machine');
SELECT table_name, from_state, to_state FROM idempotency.state_history ORDER BY changed_at, to_state;
-- the administrator's functions
SELECT idempotency.rename_owner('regress_hostile_user', 'regress_hostile_other');
SELECT idempotency.rename_owner('regress_hostile_other', 'regress_hostile_user');
SELECT idempotency.forget_role('regress_nobody');
UPDATE idempotency.inbox SET expires_at = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute'
 WHERE message_id OPERATOR(pg_catalog.=) 'm5';
UPDATE idempotency.outbox SET expires_at = pg_catalog.now() OPERATOR(pg_catalog.-) interval '1 minute'
 WHERE message_id OPERATOR(pg_catalog.=) 'o1';
SELECT idempotency.cleanup();
-- a temporary schema's look-alikes are not used either
SET search_path = pg_temp, mallory, public, pg_catalog;
SET ROLE regress_hostile_user;
SELECT outcome FROM idempotency.idempotent_begin('h3', external => true);
RESET ROLE;
SELECT count(*) AS temp_rows FROM pg_temp.registry;

SELECT * FROM planted_calls;

-- The escalation through the worker, had a superuser renamed the extension's
-- schema: the attacker creates a new "idempotency" full of look-alikes,
-- cleanup(integer) with its ALTER ROLE ... SUPERUSER among them.  Every
-- function of the extension that reaches its tables refuses to run.
ALTER SCHEMA idempotency RENAME TO idempotency_real;
SET ROLE regress_mallory;
CREATE SCHEMA idempotency;
SELECT public.plant('idempotency');
RESET ROLE;
SET ROLE regress_hostile_user;
SELECT * FROM idempotency_real.idempotent_begin('h9');
SELECT idempotency_real.idempotent_finish('h3', '{}');
SELECT idempotency_real.idempotent_abandon('h3');
SELECT idempotency_real.inbox_receive('billing', 'm9');
SELECT * FROM idempotency_real.inbox_receive_batch('billing', ARRAY['m9']);
SELECT idempotency_real.issue_token();
SELECT idempotency_real.consume_token('tk_00000000000000000000000000000000');
SELECT idempotency_real.outbox_send('orders', '{}');
SELECT * FROM idempotency_real.outbox_fetch();
SELECT idempotency_real.outbox_ack(1, ARRAY['o2']);
SELECT idempotency_real.transition_allowed('hostile_machine2', 'new', 'done');
RESET ROLE;
SELECT idempotency_real.cleanup();
SELECT idempotency_real.forget_role('regress_hostile_user');
SELECT idempotency_real.rename_owner('regress_hostile_user', 'regress_mallory');
SELECT idempotency_real.define_state_machine('hostile_machine3', '{"new": ["done"]}');
SELECT idempotency_real.drop_state_machine('hostile_machine2');
SELECT * FROM idempotency_real.state_machine_transitions('hostile_machine2');
-- the check at CREATE TRIGGER reads only PostgreSQL's catalog: any other trigger is still created
CREATE FUNCTION public.hostile_plain_trigger() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER plain_trigger BEFORE INSERT ON public.hostile_orders
	FOR EACH ROW EXECUTE FUNCTION public.hostile_plain_trigger();
DROP TRIGGER plain_trigger ON public.hostile_orders;
DROP FUNCTION public.hostile_plain_trigger();
INSERT INTO public.hostile_orders VALUES (2, 'new');
SELECT * FROM planted_calls;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_mallory';
-- the schemas put back, the extension works again in the same session
SET client_min_messages = warning;
SET ROLE regress_mallory;
DROP SCHEMA idempotency CASCADE;
RESET ROLE;
RESET client_min_messages;
ALTER SCHEMA idempotency_real RENAME TO idempotency;
SET ROLE regress_hostile_user;
SELECT outcome FROM idempotency.idempotent_begin('h10', external => true);
RESET ROLE;
SELECT idempotency.transition_allowed('hostile_machine2', 'new', 'done');
SELECT * FROM planted_calls;

RESET search_path;
DROP TABLE public.hostile_orders;
SELECT idempotency.drop_state_machine('hostile_machine');
SELECT idempotency.drop_state_machine('hostile_machine2');
TRUNCATE idempotency.registry, idempotency.inbox, idempotency.tokens, idempotency.state_history, idempotency.outbox;
DO $$
BEGIN
	EXECUTE pg_catalog.format('ALTER DATABASE %I OWNER TO %I', pg_catalog.current_database(), current_user);
END
$$;
SET client_min_messages = warning;
DROP OWNED BY regress_hostile_user, regress_mallory;
RESET client_min_messages;
DROP ROLE regress_hostile_user, regress_mallory;
DROP OPERATOR public.= (text, text);
DROP OPERATOR public.<= (timestamptz, timestamptz);
DROP OPERATOR public.+ (int, int);
DROP FUNCTION public.now(), public.texteq_planted(text, text), public.tsle_planted(timestamptz, timestamptz),
	public.pg_extension_config_dump(regclass, text), public.format(text, VARIADIC text[]),
	public.int4pl_planted(int, int), public.plant(text), public.planted_trigger(), public.planted(text),
	public.refusal(text);
DROP TABLE planted_calls;
