CREATE FUNCTION idempotency.cleanup(batch_size pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'idempotency_cleanup'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.cleanup(pg_catalog.int4) IS
'delete one batch of expired records, oldest first; returns how many';

REVOKE ALL ON FUNCTION idempotency.cleanup(pg_catalog.int4) FROM PUBLIC;
