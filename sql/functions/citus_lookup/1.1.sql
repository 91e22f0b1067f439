CREATE FUNCTION idempotency.citus_lookup(key idempotency.key,
										 scope pg_catalog.text,
										 request pg_catalog.jsonb,
										 OUT found pg_catalog.bool,
										 OUT status pg_catalog.text,
										 OUT response pg_catalog.jsonb,
										 OUT status_code pg_catalog.int4,
										 OUT body pg_catalog.bytea,
										 OUT headers pg_catalog.jsonb,
										 OUT attempt pg_catalog.int4,
										 OUT expires_at pg_catalog.timestamptz,
										 OUT lease_until pg_catalog.timestamptz,
										 OUT request_matches pg_catalog.bool,
										 OUT recovery_point pg_catalog.text,
										 OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_lookup'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_lookup(idempotency.key, pg_catalog.text, pg_catalog.jsonb) IS
'lookup as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_lookup(idempotency.key, pg_catalog.text, pg_catalog.jsonb) FROM PUBLIC;
