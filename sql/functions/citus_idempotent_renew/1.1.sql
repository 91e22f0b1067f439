CREATE FUNCTION idempotency.citus_idempotent_renew(key idempotency.key,
												   lease pg_catalog.interval,
												   scope pg_catalog.text,
												   attempt pg_catalog.int4)
RETURNS pg_catalog.timestamptz
AS 'MODULE_PATHNAME', 'idempotency_idempotent_renew'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_renew(idempotency.key, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
'idempotent_renew as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_idempotent_renew(idempotency.key, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
