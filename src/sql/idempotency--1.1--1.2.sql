/* src/sql/idempotency--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idempotency UPDATE TO '1.2'" to load this file. \quit

/*
 * The rules of src/sql/idempotency--1.0--1.1.sql hold here too.
 *
 * Application roles, by name, in a table of their own.  Records, inbox
 * entries, tokens and outbox messages belong to an application role
 * (src/owner.c).  Up to 1.1 the application roles were the grantees of
 * EXECUTE on idempotent_begin, a grant that ordinary operations remove: a
 * dump of 1.0 restored into 1.1 loses it (the function's arguments
 * changed), and an administrator who trims a consumer's privileges revokes
 * it.  Every login of such a role then stored under its own name and found
 * none of the application's records.  From 1.2 on the application roles
 * are the rows of application_roles, which only grant_usage() writes, which
 * pg_dump dumps with the extension (pg_extension_config_dump) and which
 * updates keep.  The update fills it with the roles grant_usage() was given
 * to, as 1.1 told them.
 */
CREATE TABLE idempotency.application_roles (
	role_name pg_catalog.text COLLATE pg_catalog."C" NOT NULL PRIMARY KEY
);

COMMENT ON TABLE idempotency.application_roles IS
'the roles grant_usage() was given to: the application roles records belong to';

SELECT pg_catalog.pg_extension_config_dump('idempotency.application_roles', '');
REVOKE ALL ON TABLE idempotency.application_roles FROM PUBLIC;
-- the database's owner dumps it, as it dumps the records
GRANT SELECT ON TABLE idempotency.application_roles TO pg_database_owner;

/*
 * The roles 1.1 took for application roles (the grantees of
 * idempotent_begin less its initial privileges), and the roles that were
 * granted part of the API but have the privileges of none of those (a
 * consumer from which idempotent_begin was revoked, which 1.1 made the
 * owner of nothing but its own name's records, as it does the role itself
 * from now on): each of their logins then works on their records.  A role
 * that has the privileges of one of the first kind keeps working on that
 * role's records, as under 1.1.
 */
WITH begin_grantees AS (
	SELECT a.grantee
	  FROM pg_catalog.pg_proc AS p, pg_catalog.aclexplode(p.proacl) AS a
	 WHERE p.oid OPERATOR(pg_catalog.=) 'idempotency.idempotent_begin'::pg_catalog.regproc
	   AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'
	   AND a.grantee OPERATOR(pg_catalog.<>) 0
	   AND a.grantee OPERATOR(pg_catalog.<>) p.proowner
	EXCEPT
	SELECT a.grantee
	  FROM pg_catalog.pg_init_privs AS i, pg_catalog.aclexplode(i.initprivs) AS a
	 WHERE i.objoid OPERATOR(pg_catalog.=) 'idempotency.idempotent_begin'::pg_catalog.regproc
	   AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	   AND i.objsubid OPERATOR(pg_catalog.=) 0),
api_grantees AS (
	SELECT x.grantee
	  FROM idempotency.application_api AS l,
		   LATERAL (SELECT p.proacl AS acl, p.proowner AS owner FROM pg_catalog.pg_proc AS p
					 WHERE l.object_type OPERATOR(pg_catalog.=) 'function'
					   AND p.oid OPERATOR(pg_catalog.=) pg_catalog.to_regproc('idempotency.'
						   OPERATOR(pg_catalog.||) pg_catalog.quote_ident(l.object_name))
					UNION ALL
					SELECT c.relacl, c.relowner FROM pg_catalog.pg_class AS c
					 WHERE l.object_type OPERATOR(pg_catalog.<>) 'function'
					   AND c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass('idempotency.'
						   OPERATOR(pg_catalog.||) pg_catalog.quote_ident(l.object_name))) AS o,
		   pg_catalog.aclexplode(o.acl) AS x
	 WHERE x.grantee OPERATOR(pg_catalog.<>) 0
	   AND x.grantee OPERATOR(pg_catalog.<>) o.owner
	   AND x.privilege_type OPERATOR(pg_catalog.=) l.privilege
	   AND NOT EXISTS (SELECT FROM pg_catalog.pg_roles AS r
					   WHERE r.oid OPERATOR(pg_catalog.=) x.grantee AND r.rolsuper)
	   AND NOT EXISTS (SELECT FROM begin_grantees AS b
					   WHERE pg_catalog.pg_has_role(x.grantee, b.grantee, 'USAGE')))
INSERT INTO idempotency.application_roles (role_name)
SELECT DISTINCT pg_catalog.pg_get_userbyid(g.grantee)
  FROM (TABLE begin_grantees UNION TABLE api_grantees) AS g;

/*
 * grant_usage(role) grants what application_api lists, and nothing else,
 * and records the role as an application role.
 */
CREATE OR REPLACE FUNCTION idempotency.grant_usage(role pg_catalog.regrole)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	api record;
BEGIN
	IF role IS NULL THEN
		RAISE EXCEPTION 'role must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	INSERT INTO idempotency.application_roles (role_name)
	VALUES (pg_catalog.pg_get_userbyid(role::pg_catalog.oid))
	ON CONFLICT (role_name) DO NOTHING;
	FOR api IN SELECT a.object_type, a.object_name, a.privilege
				 FROM idempotency.application_api AS a
	LOOP
		EXECUTE pg_catalog.format('GRANT %s ON %s idempotency.%I TO %s',
								  api.privilege,
								  CASE api.object_type WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END,
								  api.object_name, role);
	END LOOP;
END;
$$;

COMMENT ON FUNCTION idempotency.grant_usage(pg_catalog.regrole) IS
'make a role an application role: record it in idempotency.application_roles and grant it the API and nothing else (the functions and views listed in idempotency.application_api)';

/*
 * extend_usage(object_type, object_name): an object added to
 * application_api by an update script is granted to every application role
 * (the rows of application_roles whose role exists), and its initial
 * privileges are put back as they were before, for pg_dump's sake (see
 * carry_privileges).
 */
CREATE OR REPLACE FUNCTION idempotency.extend_usage(object_type pg_catalog.text,
													object_name pg_catalog.text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	target pg_catalog.oid;
	target_class pg_catalog.regclass;
	app record;
	saved pg_catalog.pg_init_privs;
BEGIN
	IF object_type OPERATOR(pg_catalog.=) 'function' THEN
		target := pg_catalog.to_regproc('idempotency.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(object_name));
		target_class := 'pg_catalog.pg_proc';
	ELSE
		target := pg_catalog.to_regclass('idempotency.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(object_name));
		target_class := 'pg_catalog.pg_class';
	END IF;
	IF target IS NULL THEN
		RAISE EXCEPTION 'extension object idempotency.% does not exist', object_name
			USING ERRCODE = 'undefined_object';
	END IF;

	SELECT i.* INTO saved FROM pg_catalog.pg_init_privs AS i
	 WHERE i.objoid OPERATOR(pg_catalog.=) target
	   AND i.classoid OPERATOR(pg_catalog.=) target_class
	   AND i.objsubid OPERATOR(pg_catalog.=) 0;

	FOR app IN
		SELECT r.role_name FROM idempotency.application_roles AS r
		 WHERE pg_catalog.to_regrole(pg_catalog.quote_ident(r.role_name)) IS NOT NULL
	LOOP
		EXECUTE pg_catalog.format('GRANT %s ON %s idempotency.%I TO %I',
								  (SELECT l.privilege FROM idempotency.application_api AS l
									WHERE l.object_type OPERATOR(pg_catalog.=) extend_usage.object_type
									  AND l.object_name OPERATOR(pg_catalog.=) extend_usage.object_name),
								  CASE object_type WHEN 'function' THEN 'FUNCTION' ELSE 'TABLE' END,
								  object_name, app.role_name);
	END LOOP;

	DELETE FROM pg_catalog.pg_init_privs
	 WHERE objoid OPERATOR(pg_catalog.=) target
	   AND classoid OPERATOR(pg_catalog.=) target_class
	   AND objsubid OPERATOR(pg_catalog.=) 0;
	IF saved.objoid IS NOT NULL THEN
		INSERT INTO pg_catalog.pg_init_privs SELECT saved.*;
	END IF;
END;
$$;

/*
 * citus_setup(distribute_by) also makes application_roles a reference
 * table, so that a call a worker runs (a delegate) finds the application
 * roles there.  The rest is as in 1.1.  Until it runs again after the
 * update, each node has the rows the update filled in from its own grants.
 */
CREATE OR REPLACE FUNCTION idempotency.citus_setup(distribute_by pg_catalog.text DEFAULT 'key')
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	by_scope bool;
	dist_col text;
	f_arg int4;
	saved_triggers text;
	saved_factor text;
	saved_ddl text;
	t record;
	f record;
	node record;
	views text;
	grants text;
BEGIN
	PERFORM idempotency.citus_require_coordinator();

	saved_triggers := current_setting('citus.enable_unsafe_triggers');
	saved_factor := current_setting('citus.shard_replication_factor');
	saved_ddl := current_setting('citus.enable_ddl_propagation');
	PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
	PERFORM set_config('citus.shard_replication_factor', '1', true);

	IF distribute_by IS NULL OR distribute_by <> ALL (ARRAY['key', 'scope']) THEN
		RAISE EXCEPTION 'invalid value for distribute_by: "%"', distribute_by
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = 'Distribute by ''key'' or by ''scope''.';
	END IF;
	by_scope := distribute_by = 'scope';

	FOR t IN
		SELECT v.rel::regclass AS rel, v.col, v.colocate
		  FROM (VALUES (1, 'idempotency.registry', CASE WHEN by_scope THEN 'scope' ELSE 'key' END, 'none'),
					   (2, 'idempotency.tokens', CASE WHEN by_scope THEN 'scope' ELSE 'token' END, 'idempotency.registry'),
					   (3, 'idempotency.inbox', CASE WHEN by_scope THEN 'consumer' ELSE 'message_id' END, 'none'),
					   (4, 'idempotency.state_machines', NULL, NULL),
					   (5, 'idempotency.outbox', 'ordering_key', 'none'),
					   (6, 'idempotency.application_roles', NULL, NULL)) AS v(ord, rel, col, colocate)
		 ORDER BY v.ord
	LOOP
		SELECT CASE WHEN p.partkey IS NOT NULL THEN column_to_column_name(p.logicalrelid, p.partkey) END
		  INTO dist_col
		  FROM pg_dist_partition AS p WHERE p.logicalrelid = t.rel;
		IF FOUND AND t.col IS NOT NULL AND dist_col IS DISTINCT FROM t.col THEN
			RAISE EXCEPTION 'table % is already distributed by column "%"', t.rel, dist_col
				USING ERRCODE = 'object_not_in_prerequisite_state',
					  HINT = format('citus_setup(distribute_by => %L) cannot redistribute it: start from citus_drop_tables(), or call citus_setup() with the distribution it has.', distribute_by);
		END IF;
		CONTINUE WHEN FOUND;
		IF t.col IS NULL THEN
			PERFORM create_reference_table(t.rel);
		ELSE
			PERFORM create_distributed_table(t.rel, t.col, colocate_with => t.colocate);
		END IF;
		PERFORM truncate_local_data_after_distributing_table(t.rel);
	END LOOP;

	FOR f IN
		SELECT v.fn::regprocedure AS fn, v.key_arg, v.scope_arg, v.colocate, v.force
		  FROM (VALUES ('idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)', 1, 2, 'idempotency.registry', false),
					   ('idempotency.idempotent_finish(text, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)', 1, 3, 'idempotency.registry', false),
					   ('idempotency.idempotent_abandon(text, text, integer)', 1, 2, 'idempotency.registry', false),
					   ('idempotency.lookup(text, text, jsonb)', 1, 2, 'idempotency.registry', false),
					   ('idempotency.citus_idempotent_begin(idempotency.key, text, jsonb, interval, interval, boolean, boolean, interval, boolean, boolean)', 1, 2, 'idempotency.registry', true),
					   ('idempotency.citus_idempotent_finish(idempotency.key, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)', 1, 3, 'idempotency.registry', true),
					   ('idempotency.citus_idempotent_abandon(idempotency.key, text, integer)', 1, 2, 'idempotency.registry', true),
					   ('idempotency.citus_lookup(idempotency.key, text, jsonb)', 1, 2, 'idempotency.registry', true),
					   ('idempotency.idempotent_checkpoint(text, text, jsonb, text, integer)', 1, 4, 'idempotency.registry', false),
					   ('idempotency.idempotent_renew(text, interval, text, integer)', 1, 3, 'idempotency.registry', false),
					   ('idempotency.citus_idempotent_checkpoint(idempotency.key, text, jsonb, text, integer)', 1, 4, 'idempotency.registry', true),
					   ('idempotency.citus_idempotent_renew(idempotency.key, interval, text, integer)', 1, 3, 'idempotency.registry', true),
					   ('idempotency.consume_token(text, text)', 1, 2, 'idempotency.tokens', false),
					   ('idempotency.inbox_receive(text, text, interval)', 2, 1, 'idempotency.inbox', false))
			   AS v(fn, key_arg, scope_arg, colocate, force)
	LOOP
		f_arg := CASE WHEN by_scope THEN f.scope_arg ELSE f.key_arg END;
		CONTINUE WHEN EXISTS (SELECT FROM pg_dist_object AS o
							   WHERE o.classid = 'pg_proc'::regclass AND o.objid = f.fn
								 AND o.distribution_argument_index = f_arg - 1
								 AND o.force_delegation IS NOT DISTINCT FROM f.force);
		PERFORM create_distributed_function(f.fn, '$' || f_arg, colocate_with => f.colocate,
											force_delegation => f.force);
	END LOOP;

	/*
	 * The registry's shards get the columns an update added to it: Citus
	 * does not propagate an extension script's ALTER TABLE (its hooks are
	 * off there), so shards made before the update lack them.
	 */
	PERFORM run_command_on_shards('idempotency.registry',
		'ALTER TABLE %s ADD COLUMN IF NOT EXISTS recovery_point pg_catalog.text,'
		' ADD COLUMN IF NOT EXISTS recovery_state pg_catalog.jsonb');

	PERFORM set_config('citus.enable_unsafe_triggers', saved_triggers, true);
	PERFORM set_config('citus.shard_replication_factor', saved_factor, true);

	/*
	 * The views, here and on the other nodes; then, there, the privileges
	 * on the extension's functions and views: each grantee the coordinator
	 * knows of, and PUBLIC, gets exactly its privileges here (everything
	 * revoked, then granted again).  One statement per node.
	 */
	views := $views$
		CREATE OR REPLACE VIEW idempotency.my_records WITH (security_barrier) AS
			SELECT r.key, r.scope COLLATE pg_catalog."C" AS scope, r.status, r.attempt,
				   r.created_at, r.updated_at, r.lease_until, r.expires_at, r.expired, r.response,
				   r.status_code, r.body, r.headers, r.fingerprint, r.recovery_point, r.recovery_state
			  FROM idempotency.citus_my_records() AS r;
		CREATE OR REPLACE VIEW idempotency.my_tokens WITH (security_barrier) AS
			SELECT t.token, t.scope COLLATE pg_catalog."C" AS scope, t.issued_at, t.expires_at,
				   t.consumed_at, t.state
			  FROM idempotency.citus_my_tokens() AS t;
		CREATE OR REPLACE VIEW idempotency.my_outbox WITH (security_barrier) AS
			SELECT o.message_id COLLATE pg_catalog."C" AS message_id,
				   o.topic COLLATE pg_catalog."C" AS topic,
				   o.ordering_key COLLATE pg_catalog."C" AS ordering_key, o.seq, o.payload,
				   o.headers, o.sent_at, o.attempt, o.deliveries, o.lease_until,
				   o.delivered_at, o.expires_at,
				   CASE WHEN o.delivered_at IS NOT NULL THEN 'delivered'
						WHEN o.lease_until OPERATOR(pg_catalog.>) pg_catalog.now() THEN 'leased'
						ELSE 'pending' END AS state
			  FROM idempotency.citus_my_outbox() AS o;
	$views$;
	PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
	EXECUTE views;
	PERFORM set_config('citus.enable_ddl_propagation', saved_ddl, true);

	SELECT string_agg(g.cmd, E';\n' ORDER BY g.obj, g.grantee) INTO STRICT grants
	  FROM (SELECT o.obj, a.grantee,
				   format('REVOKE ALL ON %s %s FROM %s', o.kind, o.obj, a.grantee_name)
				   || coalesce('; GRANT ' || a.privs || format(' ON %s %s TO %s', o.kind, o.obj, a.grantee_name), '')
				   || coalesce('; GRANT ' || a.grantable
							   || format(' ON %s %s TO %s WITH GRANT OPTION', o.kind, o.obj, a.grantee_name), '') AS cmd
			  FROM (SELECT 'FUNCTION' AS kind, p.oid::regprocedure::text AS obj,
						   coalesce(p.proacl, acldefault('f', p.proowner)) AS acl, p.proowner AS owner
					  FROM pg_proc AS p
					  JOIN pg_depend AS d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
					 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
					   AND d.refobjid = (SELECT e.oid FROM pg_extension AS e WHERE e.extname = 'idempotency')
					UNION ALL
					SELECT 'TABLE', c.oid::regclass::text,
						   coalesce(c.relacl, acldefault('r', c.relowner)), c.relowner
					  FROM pg_class AS c
					 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'v') AS o,
				   LATERAL (SELECT x.grantee,
								   CASE WHEN x.grantee = 0 THEN 'PUBLIC'
										ELSE quote_ident(pg_get_userbyid(x.grantee)) END AS grantee_name,
								   string_agg(x.privilege_type, ', ') FILTER (WHERE NOT x.is_grantable) AS privs,
								   string_agg(x.privilege_type, ', ') FILTER (WHERE x.is_grantable) AS grantable
							  FROM aclexplode(o.acl) AS x
							 WHERE x.grantee <> o.owner
							 GROUP BY x.grantee
							UNION ALL
							SELECT 0, 'PUBLIC', NULL, NULL
							 WHERE NOT EXISTS (SELECT FROM aclexplode(o.acl) AS x WHERE x.grantee = 0)) AS a) AS g;

	FOR node IN
		SELECT * FROM run_command_on_workers(format('DO %L',
			format('BEGIN SET LOCAL citus.enable_ddl_propagation = off; %s %s; END', views, grants)))
	LOOP
		IF NOT node.success THEN
			RAISE EXCEPTION 'could not set up the views and privileges of extension "idempotency" on node %:%',
				node.nodename, node.nodeport
				USING ERRCODE = 'connection_exception', DETAIL = node.result;
		END IF;
	END LOOP;
END;
$$;

/*
 * The outbox's objects do not change, but the 1.0 script's comment on
 * idempotency.outbox no longer holds: the partial unique index alone does
 * not serialise two senders of one ordering key (the second saw no
 * undelivered message once the key's last one was acknowledged).  Since 1.2
 * the library serialises them with a lock of the key and numbers with the
 * latest committed state (src/outbox.c).
 */

/*
 * The Citus delegates are open to everyone: a delegate runs only for a
 * caller who may run the function it stands for, which it checks when it
 * runs (src/citus.c), so its own grants added nothing but a second list to
 * keep in step.  An installation updated from 1.0 had them copied from the
 * functions at the update; a new one had none, and a role an administrator
 * granted lookup() by hand was refused citus_lookup() on the coordinator.
 */
DO $$
DECLARE
	delegate pg_catalog.regprocedure;
	saved pg_catalog.aclitem[];
BEGIN
	FOREACH delegate IN ARRAY ARRAY[
		'idempotency.citus_idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool)',
		'idempotency.citus_idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb)',
		'idempotency.citus_idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4)',
		'idempotency.citus_lookup(idempotency.key, pg_catalog.text, pg_catalog.jsonb)',
		'idempotency.citus_idempotent_checkpoint(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4)',
		'idempotency.citus_idempotent_renew(idempotency.key, pg_catalog.interval, pg_catalog.text, pg_catalog.int4)'
	]::pg_catalog.regprocedure[]
	LOOP
		SELECT i.initprivs INTO saved FROM pg_catalog.pg_init_privs AS i
		 WHERE i.objoid OPERATOR(pg_catalog.=) delegate
		   AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
		   AND i.objsubid OPERATOR(pg_catalog.=) 0;
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', delegate);
		/*
		 * A grant in an extension script records the whole ACL as the
		 * initial privileges, the installation's grants included, which
		 * pg_dump would then leave out: record the initial privileges as
		 * they were, with PUBLIC's EXECUTE (see carry_privileges).
		 */
		IF saved IS NOT NULL THEN
			UPDATE pg_catalog.pg_init_privs
			   SET initprivs = saved OPERATOR(pg_catalog.||)
				   pg_catalog.makeaclitem(0, (SELECT p.proowner FROM pg_catalog.pg_proc AS p
											   WHERE p.oid OPERATOR(pg_catalog.=) delegate),
										  'EXECUTE', false)
			 WHERE objoid OPERATOR(pg_catalog.=) delegate
			   AND classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
			   AND objsubid OPERATOR(pg_catalog.=) 0;
		END IF;
	END LOOP;
END;
$$;

/*
 * The application API, listed once: what grant_usage() grants.  The
 * delegates leave it, being open to everyone; the rest is as in 1.1.
 */
CREATE OR REPLACE VIEW idempotency.application_api AS
	SELECT v.object_type, v.object_name, v.privilege
	  FROM (VALUES
			('function', 'idempotent_begin', 'EXECUTE'),
			('function', 'idempotent_finish', 'EXECUTE'),
			('function', 'idempotent_abandon', 'EXECUTE'),
			('function', 'lookup', 'EXECUTE'),
			('view', 'my_records', 'SELECT'),
			('function', 'inbox_receive', 'EXECUTE'),
			('function', 'inbox_receive_batch', 'EXECUTE'),
			('function', 'issue_token', 'EXECUTE'),
			('function', 'consume_token', 'EXECUTE'),
			('view', 'my_tokens', 'SELECT'),
			('function', 'outbox_send', 'EXECUTE'),
			('function', 'outbox_fetch', 'EXECUTE'),
			('function', 'outbox_ack', 'EXECUTE'),
			('view', 'my_outbox', 'SELECT'),
			('function', 'lock', 'EXECUTE'),
			('function', 'try_lock', 'EXECUTE'),
			('function', 'idempotent_checkpoint', 'EXECUTE'),
			('function', 'idempotent_renew', 'EXECUTE'),
			('function', 'claim_stalled', 'EXECUTE'),
			('view', 'my_stalled_claims', 'SELECT'))
		   AS v (object_type, object_name, privilege);
