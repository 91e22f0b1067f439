CREATE FUNCTION idempotency.citus_idempotent_abandon(key idempotency.key,
													 scope pg_catalog.text,
													 attempt pg_catalog.int4)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_idempotent_abandon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4) IS
'idempotent_abandon as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_idempotent_abandon(idempotency.key, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
