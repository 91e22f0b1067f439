CREATE FUNCTION idempotency.citus_idempotent_finish(key idempotency.key,
													response pg_catalog.jsonb,
													scope pg_catalog.text,
													attempt pg_catalog.int4,
													failed pg_catalog.bool,
													status_code pg_catalog.int4,
													body pg_catalog.bytea,
													ttl pg_catalog.interval,
													headers pg_catalog.jsonb)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'idempotency_idempotent_finish'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) IS
'idempotent_finish as the key''s Citus worker runs it (every argument given)';

REVOKE ALL ON FUNCTION idempotency.citus_idempotent_finish(idempotency.key, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) FROM PUBLIC;
