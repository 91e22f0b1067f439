CREATE FUNCTION idempotency.cleanup_status(OUT dbid pg_catalog.oid,
										   OUT last_start pg_catalog.timestamptz,
										   OUT last_end pg_catalog.timestamptz,
										   OUT last_deleted pg_catalog.int8,
										   OUT total_deleted pg_catalog.int8,
										   OUT failures pg_catalog.int4,
										   OUT next_run pg_catalog.timestamptz,
										   OUT last_error pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_cleanup_status'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

REVOKE ALL ON FUNCTION idempotency.cleanup_status() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION idempotency.cleanup_status() TO pg_monitor;

COMMENT ON FUNCTION idempotency.cleanup_status() IS 'the background cleanup''s status per database, from shared memory (behind the cleanup_status view)';
