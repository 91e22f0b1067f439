CREATE FUNCTION idempotency.stats(OUT begins_execute pg_catalog.int8,
								  OUT begins_replay pg_catalog.int8,
								  OUT begins_in_progress pg_catalog.int8,
								  OUT takeovers pg_catalog.int8,
								  OUT request_mismatches pg_catalog.int8,
								  OUT finishes pg_catalog.int8,
								  OUT abandons pg_catalog.int8,
								  OUT inbox_new pg_catalog.int8,
								  OUT inbox_duplicates pg_catalog.int8,
								  OUT tokens_issued pg_catalog.int8,
								  OUT tokens_consumed pg_catalog.int8,
								  OUT transitions_checked pg_catalog.int8,
								  OUT transitions_rejected pg_catalog.int8,
								  OUT stale_writes pg_catalog.int8,
								  OUT rows_cleaned pg_catalog.int8,
								  OUT stats_reset pg_catalog.timestamptz,
								  OUT begins_waited pg_catalog.int8,
								  OUT keys_forgotten pg_catalog.int8)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_stats_1_2'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

REVOKE ALL ON FUNCTION idempotency.stats() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION idempotency.stats() TO pg_monitor;

COMMENT ON FUNCTION idempotency.stats() IS 'the counters behind the stats view';
