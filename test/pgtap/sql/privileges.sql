-- pgTAP: least privilege and safe search_path
\set ECHO none
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
BEGIN;
SELECT plan(44);

CREATE ROLE regress_nobody;
CREATE ROLE regress_app;
SELECT idempotency.grant_usage('regress_app');

SELECT table_privs_are('idempotency', 'registry', 'public', ARRAY[]::text[], 'PUBLIC has no privilege on the registry');
SELECT table_privs_are('idempotency', 'registry', 'regress_app', ARRAY[]::text[], 'even a granted role cannot touch the registry');
SELECT table_privs_are('idempotency', 'application_roles', 'public', ARRAY[]::text[], 'PUBLIC has no privilege on the application roles');
SELECT table_privs_are('idempotency', 'application_roles', 'regress_app', ARRAY[]::text[], 'an application role cannot touch the application roles');
SELECT is((SELECT string_agg(role_name, ',') FROM idempotency.application_roles WHERE role_name LIKE 'regress%'),
	'regress_app', 'grant_usage records the application role, and only it');
SELECT table_privs_are('idempotency', 'my_records', 'regress_nobody', ARRAY[]::text[], 'my_records is not open to PUBLIC');
SELECT table_privs_are('idempotency', 'my_records', 'regress_app', ARRAY['SELECT'], 'grant_usage gives SELECT on my_records only');
SELECT function_privs_are('idempotency', 'idempotent_begin', ARRAY['text', 'text', 'jsonb', 'interval', 'interval', 'boolean', 'boolean', 'interval', 'boolean', 'boolean'],
	'regress_nobody', ARRAY[]::text[], 'idempotent_begin is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'idempotent_finish', ARRAY['text', 'jsonb', 'text', 'integer', 'boolean', 'integer', 'bytea', 'interval', 'jsonb'],
	'regress_nobody', ARRAY[]::text[], 'idempotent_finish is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'idempotent_abandon', ARRAY['text', 'text', 'integer'],
	'regress_nobody', ARRAY[]::text[], 'idempotent_abandon is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'idempotent_call', ARRAY['text', 'regprocedure', 'jsonb', 'text', 'interval', 'interval'],
	'regress_nobody', ARRAY[]::text[], 'idempotent_call is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'idempotent_call', ARRAY['text', 'regprocedure', 'jsonb', 'text', 'interval', 'interval'],
	'regress_app', ARRAY['EXECUTE'], 'grant_usage gives EXECUTE on idempotent_call');
SELECT function_privs_are('idempotency', 'grant_usage', ARRAY['regrole'],
	'regress_app', ARRAY[]::text[], 'grant_usage is for administrators only');
SELECT function_privs_are('idempotency', 'idempotent_begin', ARRAY['text', 'text', 'jsonb', 'interval', 'interval', 'boolean', 'boolean', 'interval', 'boolean', 'boolean'],
	'regress_app', ARRAY['EXECUTE'], 'grant_usage gives EXECUTE on idempotent_begin');
SELECT function_privs_are('idempotency', 'make_key', ARRAY['text', 'text', 'text', 'text'],
	'regress_nobody', ARRAY['EXECUTE'], 'pure functions of the key type stay open to all');
SELECT function_privs_are('idempotency', 'cleanup', ARRAY['integer'],
	'regress_app', ARRAY[]::text[], 'cleanup() is for administrators only, even for granted roles');
SELECT table_privs_are('idempotency', 'cleanup_status', 'regress_nobody', ARRAY[]::text[], 'cleanup_status is not open to PUBLIC');
SELECT table_privs_are('idempotency', 'cleanup_status', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor may read cleanup_status');
SELECT schema_privs_are('idempotency', 'regress_nobody', ARRAY['USAGE'], 'everyone may use the key type''s schema');
SELECT table_privs_are('idempotency', 'outbox', 'regress_app', ARRAY[]::text[], 'even a granted role cannot touch the outbox');
SELECT sequence_privs_are('idempotency', 'outbox_attempt_seq', 'regress_app', ARRAY[]::text[], 'nor draw fencing attempts by hand');
SELECT table_privs_are('idempotency', 'my_outbox', 'regress_nobody', ARRAY[]::text[], 'my_outbox is not open to PUBLIC');
SELECT table_privs_are('idempotency', 'my_outbox', 'regress_app', ARRAY['SELECT'], 'grant_usage gives SELECT on my_outbox only');
SELECT function_privs_are('idempotency', 'outbox_fetch', ARRAY['integer', 'interval'],
	'regress_nobody', ARRAY[]::text[], 'outbox_fetch is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'outbox_ack', ARRAY['bigint', 'text[]', 'interval'],
	'regress_app', ARRAY['EXECUTE'], 'grant_usage gives EXECUTE on outbox_ack');

-- search_path: every function that is not C sets it; C functions use only
-- schema-qualified SQL (proved by test/regress/sql/extension_hostile.sql)
SELECT is(
	(SELECT array_agg(p.proname ORDER BY p.proname) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
	  WHERE p.pronamespace = 'idempotency'::regnamespace AND l.lanname <> 'c'
		AND NOT coalesce(p.proconfig @> ARRAY['search_path=pg_catalog, pg_temp'], false)),
	NULL, 'every non-C function sets search_path = pg_catalog, pg_temp');
SELECT is(
	(SELECT array_agg(p.proname ORDER BY p.proname) FROM pg_proc p
	  WHERE p.pronamespace = 'idempotency'::regnamespace AND p.prosecdef),
	ARRAY['define_state_machine', 'drop_state_machine', 'metrics']::name[],
	'only the two functions that write state machine definitions, and metrics, which returns counts, are SECURITY DEFINER');

-- the extension's objects belong to the extension
SELECT is(
	(SELECT count(*)::int FROM pg_class c WHERE c.relnamespace = 'idempotency'::regnamespace
	  AND c.relkind IN ('r', 'v') AND NOT EXISTS (SELECT 1 FROM pg_depend d
		WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')),
	0, 'every table and view is a member of the extension');

-- roles see only their own records
SET ROLE regress_app;
SELECT is((SELECT outcome FROM idempotency.idempotent_begin('pgtap-key', external => true)), 'execute', 'a granted role can claim');
SELECT is((SELECT count(*)::int FROM idempotency.my_records), 1, 'and sees its record');
RESET ROLE;
SELECT is((SELECT owner FROM idempotency.registry WHERE key = 'pgtap-key'), 'regress_app', 'owned by the role''s name');

-- records of a role name: forget_role and rename_owner are for administrators
SELECT function_privs_are('idempotency', 'forget_role', ARRAY['text'],
	'regress_nobody', ARRAY[]::text[], 'forget_role is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'forget_role', ARRAY['text'],
	'regress_app', ARRAY[]::text[], 'grant_usage does not give forget_role');
SELECT function_privs_are('idempotency', 'rename_owner', ARRAY['text', 'text'],
	'regress_nobody', ARRAY[]::text[], 'rename_owner is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'rename_owner', ARRAY['text', 'text'],
	'regress_app', ARRAY[]::text[], 'grant_usage does not give rename_owner');
SELECT function_privs_are('idempotency', 'forget_key', ARRAY['text', 'text', 'text', 'boolean'],
	'regress_nobody', ARRAY[]::text[], 'forget_key is revoked from PUBLIC');
SELECT function_privs_are('idempotency', 'forget_key', ARRAY['text', 'text', 'text', 'boolean'],
	'regress_app', ARRAY[]::text[], 'grant_usage does not give forget_key');

-- metrics: counts for pg_monitor, nothing for anyone else
SELECT table_privs_are('idempotency', 'metrics', 'regress_nobody', ARRAY[]::text[], 'metrics is not open to PUBLIC');
SELECT table_privs_are('idempotency', 'metrics', 'regress_app', ARRAY[]::text[], 'grant_usage does not give metrics');
SELECT table_privs_are('idempotency', 'metrics', 'pg_monitor', ARRAY['SELECT'], 'pg_monitor may read metrics');
SELECT function_privs_are('idempotency', 'metrics', ARRAY[]::text[],
	'pg_monitor', ARRAY['EXECUTE'], 'pg_monitor may call metrics()');

-- the extension owns its schema: a member of the extension, owned by the
-- superuser who installed it, and nobody else may create in it
SELECT is((SELECT count(*)::int FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
	WHERE e.extname = 'idempotency' AND d.classid = 'pg_namespace'::regclass
	  AND d.objid = 'idempotency'::regnamespace AND d.deptype = 'e'),
	1, 'schema idempotency is a member of the extension');
SELECT ok((SELECT r.rolsuper FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner
	WHERE n.nspname = 'idempotency'), 'and is owned by a superuser');
SELECT schema_privs_are('idempotency', 'regress_app', ARRAY['USAGE'], 'a granted role may use it but not create in it');

SELECT * FROM finish();
ROLLBACK;
