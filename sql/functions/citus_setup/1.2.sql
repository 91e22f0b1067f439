/*
 * citus_setup(distribute_by) also makes application_roles a reference
 * table, so that a call a worker runs (a delegate) finds the application
 * roles there.  The rest is as in 1.1.  Until it runs again after the
 * update, each node has the rows the update filled in from its own grants.
 * The functions it distributes are named, and found in the catalog (each
 * name is unique in the schema); the views it installs are those of
 * sql/views/NAME/VERSION-citus.sql.
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
		SELECT ('idempotency.' || v.fn)::regproc::oid::regprocedure AS fn, v.key_arg, v.scope_arg, v.colocate, v.force
		  FROM (VALUES ('idempotent_begin', 1, 2, 'idempotency.registry', false),
					   ('idempotent_finish', 1, 3, 'idempotency.registry', false),
					   ('idempotent_abandon', 1, 2, 'idempotency.registry', false),
					   ('lookup', 1, 2, 'idempotency.registry', false),
					   ('citus_idempotent_begin', 1, 2, 'idempotency.registry', true),
					   ('citus_idempotent_finish', 1, 3, 'idempotency.registry', true),
					   ('citus_idempotent_abandon', 1, 2, 'idempotency.registry', true),
					   ('citus_lookup', 1, 2, 'idempotency.registry', true),
					   ('idempotent_checkpoint', 1, 4, 'idempotency.registry', false),
					   ('idempotent_renew', 1, 3, 'idempotency.registry', false),
					   ('citus_idempotent_checkpoint', 1, 4, 'idempotency.registry', true),
					   ('citus_idempotent_renew', 1, 3, 'idempotency.registry', true),
					   ('consume_token', 1, 2, 'idempotency.tokens', false),
					   ('inbox_receive', 2, 1, 'idempotency.inbox', false))
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
		#include "views/my_records/1.1-citus.sql"
		#include "views/my_tokens/1.0-citus.sql"
		#include "views/my_outbox/1.0-citus.sql"
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
