/*
 * The functions take keys as text, so that a text or varchar value (a
 * PL/pgSQL variable, a driver's text parameter) needs no cast; they apply
 * the key type's rules to it, and an idempotency.key value passes through
 * its implicit cast to text.
 */
CREATE FUNCTION idempotency.idempotent_begin(key pg_catalog.text,
											 scope pg_catalog.text DEFAULT '',
											 request pg_catalog.jsonb DEFAULT NULL,
											 ttl pg_catalog.interval DEFAULT '24 hours',
											 lease pg_catalog.interval DEFAULT NULL,
											 wait pg_catalog.bool DEFAULT true,
											 require_token pg_catalog.bool DEFAULT false,
											 max_wait pg_catalog.interval DEFAULT NULL,
											 defer_claim pg_catalog.bool DEFAULT false,
											 OUT outcome pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT response pg_catalog.jsonb,
											 OUT attempt pg_catalog.int4,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz,
											 OUT status_code pg_catalog.int4,
											 OUT body pg_catalog.bytea,
											 OUT headers pg_catalog.jsonb,
											 OUT previous_attempt pg_catalog.int4,
											 OUT previous_end pg_catalog.text,
											 OUT retry_after pg_catalog.int4)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool) IS
'claim an idempotency key: outcome execute, replay or in_progress';

REVOKE ALL ON FUNCTION idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool) FROM PUBLIC;
