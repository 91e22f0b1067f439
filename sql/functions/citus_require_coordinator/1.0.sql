/*
 * citus_require_coordinator(): refuse where Citus is not installed in this
 * database, or on a node that is not the coordinator (Citus group 0, which
 * holds even before any node is registered, unlike citus_is_coordinator()).
 */
CREATE FUNCTION idempotency.citus_require_coordinator()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	group_id int4;
BEGIN
	IF NOT EXISTS (SELECT FROM pg_extension AS e WHERE e.extname = 'citus') THEN
		RAISE EXCEPTION 'extension "citus" is not installed in this database'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  HINT = 'Put citus first in shared_preload_libraries, restart, and run CREATE EXTENSION citus.';
	END IF;
	SELECT g.groupid INTO group_id FROM pg_dist_local_group AS g;
	IF group_id IS DISTINCT FROM 0 THEN
		RAISE EXCEPTION 'this node is not the Citus coordinator'
			USING ERRCODE = 'object_not_in_prerequisite_state',
				  DETAIL = format('This node is in Citus group %s; the coordinator is group 0.', group_id),
				  HINT = 'Run it on the coordinator.';
	END IF;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_require_coordinator() IS
'raise an error unless this is the Citus coordinator (citus_setup and citus_drop_tables)';

REVOKE ALL ON FUNCTION idempotency.citus_require_coordinator() FROM PUBLIC;
