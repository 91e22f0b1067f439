CREATE FUNCTION idempotency.stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_stats_reset'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

REVOKE ALL ON FUNCTION idempotency.stats_reset() FROM PUBLIC;

COMMENT ON FUNCTION idempotency.stats_reset() IS 'set every counter of the stats view back to zero (needs shared_preload_libraries)';
