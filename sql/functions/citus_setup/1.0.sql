CREATE FUNCTION idempotency.citus_setup()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
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

	FOR t IN
		SELECT v.rel::regclass AS rel, v.col, v.colocate
		  FROM (VALUES (1, 'idempotency.registry', 'key', 'none'),
					   (2, 'idempotency.tokens', 'token', 'idempotency.registry'),
					   (3, 'idempotency.inbox', 'message_id', 'none'),
					   (4, 'idempotency.state_machines', NULL, NULL),
					   (5, 'idempotency.outbox', 'ordering_key', 'none')) AS v(ord, rel, col, colocate)
		 ORDER BY v.ord
	LOOP
		CONTINUE WHEN EXISTS (SELECT FROM pg_dist_partition AS p WHERE p.logicalrelid = t.rel);
		IF t.col IS NULL THEN
			PERFORM create_reference_table(t.rel);
		ELSE
			PERFORM create_distributed_table(t.rel, t.col, colocate_with => t.colocate);
		END IF;
		PERFORM truncate_local_data_after_distributing_table(t.rel);
	END LOOP;

	FOR f IN
		SELECT v.fn::regprocedure AS fn, v.arg, v.colocate
		  FROM (VALUES ('idempotency.idempotent_begin(text, text, jsonb, interval, interval, boolean, boolean, interval, boolean)', '$1', 'idempotency.registry'),
					   ('idempotency.idempotent_finish(text, jsonb, text, integer, boolean, integer, bytea, interval, jsonb)', '$1', 'idempotency.registry'),
					   ('idempotency.idempotent_abandon(text, text, integer)', '$1', 'idempotency.registry'),
					   ('idempotency.lookup(text, text, jsonb)', '$1', 'idempotency.registry'),
					   ('idempotency.consume_token(text, text)', '$1', 'idempotency.tokens'),
					   ('idempotency.inbox_receive(text, text, interval)', '$2', 'idempotency.inbox')) AS v(fn, arg, colocate)
	LOOP
		CONTINUE WHEN EXISTS (SELECT FROM pg_dist_object AS o
							   WHERE o.classid = 'pg_proc'::regclass AND o.objid = f.fn
								 AND o.distribution_argument_index IS NOT NULL);
		PERFORM create_distributed_function(f.fn, f.arg, colocate_with => f.colocate);
	END LOOP;

	PERFORM set_config('citus.enable_unsafe_triggers', saved_triggers, true);
	PERFORM set_config('citus.shard_replication_factor', saved_factor, true);

	/*
	 * The views, here and on the other nodes; then, there, the privileges
	 * on the extension's functions and views: each grantee the coordinator
	 * knows of, and PUBLIC, gets exactly its privileges here (everything
	 * revoked, then granted again).  One statement per node.
	 */
	views := $views$
		#include "views/my_records/1.0-citus.sql"
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

COMMENT ON FUNCTION idempotency.citus_setup() IS
'distribute the extension''s tables and functions with Citus; run on the coordinator, again after granting by hand';

REVOKE ALL ON FUNCTION idempotency.citus_setup() FROM PUBLIC;
