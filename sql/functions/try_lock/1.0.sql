CREATE FUNCTION idempotency.try_lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_try_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) IS
'take a transaction-scoped lock on a key if it is free (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
