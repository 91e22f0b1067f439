/*
 * On the Citus coordinator, idempotent_begin, idempotent_finish,
 * idempotent_abandon and lookup hand each call to the worker that holds the
 * key, as the caller, through these delegates (src/citus.c,
 * doc/scaling-out-single-shard.md).  They are the same C entry points with
 * the key declared as an idempotency.key: citus_setup() distributes them by
 * the key with force_delegation, and Citus pins a delegated call's
 * transaction on the worker to the value of the key, compared by type as
 * well as by value with the registry's.  Without Citus they behave exactly
 * as the functions they stand for, so they are granted with them
 * (application_api).
 */
CREATE FUNCTION idempotency.citus_idempotent_begin(key idempotency.key,
												   scope pg_catalog.text,
												   request pg_catalog.jsonb,
												   ttl pg_catalog.interval,
												   lease pg_catalog.interval,
												   wait pg_catalog.bool,
												   require_token pg_catalog.bool,
												   max_wait pg_catalog.interval,
												   defer_claim pg_catalog.bool,
												   external pg_catalog.bool,
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
												   OUT retry_after pg_catalog.int4,
												   OUT recovery_point pg_catalog.text,
												   OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_idempotent_begin_1_1'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) IS
'idempotent_begin as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_idempotent_begin(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool) FROM PUBLIC;
