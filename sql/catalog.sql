--
-- The extension's catalog entries: every member object is described
-- (COMMENT ON), so \dx+ and \df+ explain each one.
--
SELECT pg_describe_object(d.classid, d.objid, 0) AS undescribed
  FROM pg_depend AS d
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idempotency')
   AND obj_description(d.objid, (SELECT relname FROM pg_class WHERE oid = d.classid)) IS NULL
 ORDER BY 1;
