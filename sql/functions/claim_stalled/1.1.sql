/*
 * claim_stalled: a completer's batch.  Takes over, as a begin's take-over
 * does, up to batch_size of the caller's stalled claims, passing over those
 * another transaction holds (SKIP LOCKED), so that no two completers get the
 * same claim.
 */
CREATE FUNCTION idempotency.claim_stalled(scope pg_catalog.text DEFAULT NULL,
										  batch_size pg_catalog.int4 DEFAULT 10,
										  lease pg_catalog.interval DEFAULT NULL,
										  OUT key idempotency.key,
										  OUT scope pg_catalog.text,
										  OUT attempt pg_catalog.int4,
										  OUT previous_attempt pg_catalog.int4,
										  OUT lease_until pg_catalog.timestamptz,
										  OUT expires_at pg_catalog.timestamptz,
										  OUT created_at pg_catalog.timestamptz,
										  OUT recovery_point pg_catalog.text,
										  OUT recovery_state pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_claim_stalled'
LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 10;

COMMENT ON FUNCTION idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval) IS
'take over a batch of the caller''s stalled claims, each with a new attempt and its recovery point, for a completer';

REVOKE ALL ON FUNCTION idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval) FROM PUBLIC;
