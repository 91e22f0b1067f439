/*
 * citus_drop_tables(): drop the extension's distributed tables, with their
 * rows, so that DROP EXTENSION can follow.  Citus cannot drop, in the same
 * DROP EXTENSION, a distributed table and the type it is distributed by
 * (idempotency.key): its shards would stay behind.  Each table leaves the
 * extension first, then goes with DROP TABLE, which Citus takes to every
 * shard.
 */
CREATE FUNCTION idempotency.citus_drop_tables()
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	t regclass;
BEGIN
	PERFORM idempotency.citus_require_coordinator();
	FOR t IN
		SELECT p.logicalrelid
		  FROM pg_dist_partition AS p
		  JOIN pg_class AS c ON c.oid = p.logicalrelid
		 WHERE c.relnamespace = 'idempotency'::regnamespace
		 ORDER BY c.relname
	LOOP
		EXECUTE format('ALTER EXTENSION idempotency DROP TABLE %s', t);
		EXECUTE format('DROP TABLE %s', t);
	END LOOP;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_drop_tables() IS
'drop the extension''s distributed tables and their rows, before DROP EXTENSION on a Citus cluster';

REVOKE ALL ON FUNCTION idempotency.citus_drop_tables() FROM PUBLIC;
