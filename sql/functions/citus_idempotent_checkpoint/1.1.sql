CREATE FUNCTION idempotency.citus_idempotent_checkpoint(key idempotency.key,
														recovery_point pg_catalog.text,
														recovery_state pg_catalog.jsonb,
														scope pg_catalog.text,
														attempt pg_catalog.int4)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_checkpoint'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_checkpoint(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) IS
'idempotent_checkpoint as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_idempotent_checkpoint(idempotency.key, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
