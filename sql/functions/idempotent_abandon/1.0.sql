CREATE FUNCTION idempotency.idempotent_abandon(key pg_catalog.text,
											   scope pg_catalog.text DEFAULT '',
											   attempt pg_catalog.int4 DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_idempotent_abandon'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
'give up a claim so that the next idempotent_begin executes again';

REVOKE ALL ON FUNCTION idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
