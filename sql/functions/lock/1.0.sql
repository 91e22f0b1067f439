CREATE FUNCTION idempotency.lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS void
AS 'MODULE_PATHNAME', 'idempotency_lock'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) IS
'wait for a transaction-scoped lock on a key (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
