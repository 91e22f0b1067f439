--
-- The extension's catalog entries: every member object is described
-- (COMMENT ON), so \dx+ and \df+ explain each one.
--
SELECT pg_describe_object(d.classid, d.objid, 0) AS undescribed
  FROM pg_depend AS d
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
   AND obj_description(d.objid, (SELECT relname FROM pg_class WHERE oid = d.classid)) IS NULL
   -- a table's or view's row type and an array type are described by their
   -- table, view or element type (17 and later list them as members too)
   AND NOT EXISTS (SELECT FROM pg_type AS t
					WHERE d.classid = 'pg_type'::regclass AND t.oid = d.objid
					  AND (t.typrelid <> 0 OR t.typelem <> 0))
 ORDER BY 1;
