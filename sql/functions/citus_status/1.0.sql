/*
 * citus_status(): how each table, API function and view of the extension is
 * placed: distributed (by which column or argument, in which co-location
 * group, in how many shards), reference, owner-run (the views after
 * citus_setup()) or local.  Without Citus, everything is local.
 */
CREATE FUNCTION idempotency.citus_status(OUT object pg_catalog.text,
										 OUT kind pg_catalog.text,
										 OUT distribution pg_catalog.text,
										 OUT distributed_by pg_catalog.text,
										 OUT colocation_id pg_catalog.int4,
										 OUT shards pg_catalog.int4)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN QUERY
		SELECT v.oid::regclass::text, 'view',
			   CASE WHEN pg_get_viewdef(v.oid) LIKE '%citus_my_%' THEN 'owner-run' ELSE 'local' END,
			   NULL::text, NULL::int4, NULL::int4
		  FROM pg_class AS v
		 WHERE v.relnamespace = 'idempotency'::regnamespace AND v.relkind = 'v'
		   AND v.relname = ANY (ARRAY['my_records', 'my_tokens', 'my_outbox']);
	IF NOT EXISTS (SELECT FROM pg_extension AS e WHERE e.extname = 'citus') THEN
		RETURN QUERY
			SELECT c.oid::regclass::text, 'table', 'local', NULL::text, NULL::int4, NULL::int4
			  FROM pg_class AS c
			 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'r'
			 ORDER BY 1;
		RETURN;
	END IF;
	RETURN QUERY
		SELECT c.oid::regclass::text, 'table',
			   CASE WHEN p.partmethod = 'h' THEN 'distributed'
					WHEN p.partmethod = 'n' AND p.repmodel = 't' THEN 'reference'
					WHEN p.partmethod IS NOT NULL THEN 'citus local'
					ELSE 'local' END,
			   CASE WHEN p.partmethod = 'h' THEN column_to_column_name(p.logicalrelid, p.partkey) END,
			   p.colocationid,
			   CASE WHEN p.partmethod IS NOT NULL
					THEN (SELECT count(*)::int4 FROM pg_dist_shard AS s WHERE s.logicalrelid = c.oid) END
		  FROM pg_class AS c
		  LEFT JOIN pg_dist_partition AS p ON p.logicalrelid = c.oid
		 WHERE c.relnamespace = 'idempotency'::regnamespace AND c.relkind = 'r'
		 ORDER BY 1;
	RETURN QUERY
		SELECT f.oid::regprocedure::text, 'function',
			   CASE WHEN o.distribution_argument_index IS NOT NULL THEN 'distributed' ELSE 'local' END,
			   f.proargnames[o.distribution_argument_index + 1],
			   o.colocationid, NULL::int4
		  FROM pg_proc AS f
		  LEFT JOIN pg_dist_object AS o ON o.classid = 'pg_proc'::regclass AND o.objid = f.oid
		 WHERE f.pronamespace = 'idempotency'::regnamespace
		   AND f.proname = ANY (ARRAY['idempotent_begin', 'idempotent_finish', 'idempotent_abandon',
									  'lookup', 'consume_token', 'inbox_receive', 'inbox_receive_batch',
									  'issue_token', 'outbox_send', 'outbox_fetch', 'outbox_ack'])
		 ORDER BY 1;
END;
$$;

COMMENT ON FUNCTION idempotency.citus_status() IS
'how Citus places each table, API function and view of the extension';
