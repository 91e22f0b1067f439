-- pgTAP: the extension's schema as installed
\set ECHO none
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
BEGIN;
SELECT plan(42);

SELECT has_schema('idempotency');
SELECT has_type('idempotency', 'key', 'type idempotency.key exists');
SELECT has_table('idempotency', 'registry', 'the registry table exists');
SELECT has_view('idempotency', 'my_records', 'the my_records view exists');
SELECT columns_are('idempotency', 'registry',
	ARRAY['owner', 'scope', 'key', 'status', 'attempt', 'fingerprint', 'response',
		  'status_code', 'body', 'headers', 'created_at', 'updated_at', 'lease_until', 'expires_at',
		  'recovery_point', 'recovery_state'],
	'the registry has exactly the documented columns');
SELECT col_type_is('idempotency', 'registry', 'owner', 'text', 'owner is stored by name, as text');
SELECT col_type_is('idempotency', 'registry', 'key', 'idempotency', 'key', 'key column has the key type');
SELECT has_pk('idempotency', 'registry', 'the registry has a primary key');
SELECT col_is_pk('idempotency', 'registry', ARRAY['key', 'scope', 'owner'], 'the primary key is (key, scope, owner)');
SELECT is((SELECT count(*)::int FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
	WHERE c.oid = 'idempotency.registry'::regclass AND a.attnum > 0 AND (a.attidentity <> '' OR pg_get_serial_sequence('idempotency.registry', a.attname) IS NOT NULL)),
	0, 'no serial or identity columns');
SELECT is((SELECT count(*)::int FROM pg_attrdef WHERE adrelid = 'idempotency.registry'::regclass),
	0, 'no column has a default: a fresh claim leaves out the columns it holds NULL');
SELECT is((SELECT collname FROM pg_collation WHERE oid = (SELECT attcollation FROM pg_attribute WHERE attrelid = 'idempotency.registry'::regclass AND attname = 'owner')),
	'C', 'owner compares bytewise');
SELECT is((SELECT collname FROM pg_collation WHERE oid = (SELECT attcollation FROM pg_attribute WHERE attrelid = 'idempotency.registry'::regclass AND attname = 'scope')),
	'C', 'scope compares bytewise');
SELECT is((SELECT typcollation FROM pg_type WHERE oid = 'idempotency.key'::regtype), 0::oid, 'the key type is not collatable');
SELECT ok((SELECT 'fillfactor=80' = ANY (reloptions) FROM pg_class WHERE oid = 'idempotency.registry'::regclass),
	'the registry leaves room for HOT updates');
SELECT is((SELECT relpersistence FROM pg_class WHERE oid = 'idempotency.registry'::regclass), 'p', 'the registry is WAL-logged');
SELECT ok((SELECT 'idempotency.registry'::regclass = ANY (extconfig) FROM pg_extension WHERE extname = 'idempotency'),
	'pg_dump keeps the registry''s rows');


-- every function, view and table: a new one is a decision about its
-- privileges (test/pgtap/sql/privileges.sql) and its documentation
SELECT functions_are('idempotency', ARRAY[
	'carry_privileges', 'check_new_triggers', 'check_transition', 'citus_drop_tables',
	'citus_idempotent_abandon', 'citus_idempotent_begin', 'citus_idempotent_checkpoint', 'citus_idempotent_finish',
	'citus_idempotent_renew', 'citus_lookup',
	'citus_my_outbox',
	'citus_my_records', 'citus_my_tokens', 'citus_require_coordinator', 'citus_setup', 'citus_status',
	'claim_stalled', 'cleanup', 'cleanup_status', 'consume_token', 'define_state_machine', 'drop_state_machine',
	'extend_usage', 'forget_key', 'forget_role', 'grant_usage', 'idempotent_abandon', 'idempotent_begin', 'idempotent_call',
	'idempotent_checkpoint', 'idempotent_finish', 'idempotent_renew', 'inbox_receive', 'inbox_receive_batch', 'issue_token', 'key', 'key_cmp',
	'key_eq', 'key_ge', 'key_gt', 'key_hash', 'key_hash_extended', 'key_hash_text',
	'key_hash_text_extended', 'key_in', 'key_le', 'key_lt', 'key_ne', 'key_out', 'key_recv',
	'key_send', 'key_text_cmp', 'key_text_eq', 'key_text_ge', 'key_text_gt', 'key_text_le',
	'key_text_lt', 'key_text_ne', 'lock', 'lookup', 'make_key', 'metrics', 'outbox_ack', 'outbox_fetch',
	'outbox_send', 'owner_name', 'parse_key', 'record_transition', 'rename_owner',
	'state_history_visible', 'state_machine_transitions', 'state_machines_changed', 'stats',
	'stats_reset', 'text', 'text_bytewise_cmp', 'text_bytewise_eq', 'text_key_cmp', 'text_key_eq',
	'text_key_ge', 'text_key_gt', 'text_key_le', 'text_key_lt', 'text_key_ne', 'transition_allowed',
	'try_lock', 'version_guard'],
	'the extension defines exactly these functions');
SELECT views_are('idempotency', ARRAY['application_api', 'cleanup_status', 'metrics', 'my_outbox', 'my_records', 'my_stalled_claims', 'my_tokens', 'stats'],
	'the extension defines exactly these views');
SELECT tables_are('idempotency', ARRAY['application_roles', 'inbox', 'outbox', 'registry', 'state_history', 'state_machines', 'tokens'],
	'the extension defines exactly these tables');

SELECT has_function('idempotency', 'idempotent_begin', ARRAY['text', 'text', 'jsonb', 'interval', 'interval', 'boolean', 'boolean', 'interval', 'boolean', 'boolean']);
SELECT is((SELECT array_agg(n || ' ' || format_type(t, NULL) ORDER BY o)
			 FROM pg_proc AS p,
				  unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a(n, t, m, o)
			WHERE p.oid = 'idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)'::regprocedure
			  AND m = 'o'),
	ARRAY['outcome text', 'status text', 'response jsonb', 'attempt integer', 'expires_at timestamp with time zone',
		  'lease_until timestamp with time zone', 'status_code integer', 'body bytea', 'headers jsonb',
		  'previous_attempt integer', 'previous_end text', 'retry_after integer',
		  'recovery_point text', 'recovery_state jsonb'],
	'idempotent_begin answers with the record''s columns, then the previous attempt and how it ended, when to retry, and the last recovery point');
SELECT is((SELECT boot_val || ' ' || unit || ' ' || context FROM pg_settings WHERE name = 'idempotency.max_wait'),
	'5000 ms user', 'idempotency.max_wait bounds a wait by default, and any session may change it');
SELECT has_function('idempotency', 'idempotent_finish', ARRAY['text', 'jsonb', 'text', 'integer', 'boolean', 'integer', 'bytea', 'interval', 'jsonb']);
SELECT function_returns('idempotency', 'idempotent_finish', ARRAY['text', 'jsonb', 'text', 'integer', 'boolean', 'integer', 'bytea', 'interval', 'jsonb'], 'text',
	'idempotent_finish returns the status it stored (callable as a PL/pgSQL assignment)');
SELECT has_function('idempotency', 'idempotent_abandon', ARRAY['text', 'text', 'integer']);
SELECT function_returns('idempotency', 'idempotent_call', ARRAY['text', 'regprocedure', 'jsonb', 'text', 'interval', 'interval'], 'record',
	'idempotent_call takes the handler as a regprocedure and returns one row');
SELECT function_returns('idempotency', 'idempotent_checkpoint', ARRAY['text', 'text', 'jsonb', 'text', 'integer'], 'text',
	'idempotent_checkpoint returns the recovery point it stored (callable as a PL/pgSQL assignment)');
SELECT function_returns('idempotency', 'idempotent_renew', ARRAY['text', 'interval', 'text', 'integer'], 'timestamp with time zone',
	'idempotent_renew returns the new lease_until');
SELECT function_returns('idempotency', 'claim_stalled', ARRAY['text', 'integer', 'interval'], 'setof record',
	'claim_stalled returns a batch of claims');
SELECT has_function('idempotency', 'make_key', ARRAY['text', 'text', 'text', 'text']);
SELECT has_function('idempotency', 'parse_key', ARRAY['text']);
SELECT function_returns('idempotency', 'make_key', ARRAY['text', 'text', 'text', 'text'], 'idempotency.key');
SELECT volatility_is('idempotency', 'make_key', ARRAY['text', 'text', 'text', 'text'], 'immutable');
SELECT volatility_is('idempotency', 'idempotent_begin', ARRAY['text', 'text', 'jsonb', 'interval', 'interval', 'boolean', 'boolean', 'interval', 'boolean', 'boolean'], 'volatile');

SELECT has_opclass('idempotency', 'key_ops', 'a btree operator class for keys');
SELECT has_opclass('idempotency', 'key_hash_ops', 'a hash operator class for keys');
SELECT is((SELECT count(*)::int FROM pg_amproc p JOIN pg_opfamily f ON f.oid = p.amprocfamily
	WHERE f.opfname = 'key_hash_ops' AND f.opfnamespace = 'idempotency'::regnamespace
	  AND p.amproclefttype = 'idempotency.key'::regtype), 2,
	'the hash operator class has support functions 1 and 2');
SELECT ok((SELECT oprcanhash AND oprcanmerge FROM pg_operator WHERE oprname = '='
	AND oprleft = 'idempotency.key'::regtype AND oprright = 'idempotency.key'::regtype),
	'= on keys HASHES and MERGES');
SELECT has_cast('text', 'idempotency.key', 'a cast from text');
SELECT has_cast('character varying', 'idempotency.key', 'a cast from varchar');
SELECT has_cast('idempotency.key', 'text', 'a cast to text');

SELECT * FROM finish();
ROLLBACK;
