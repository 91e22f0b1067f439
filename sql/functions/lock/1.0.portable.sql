/* locks.c's lock, in SQL: the key's transaction-scoped advisory lock */
CREATE FUNCTION idempotency.lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	SELECT pg_catalog.pg_advisory_xact_lock(idempotency.portable_key_lock(CURRENT_USER, 'lock', key, scope));
END;

COMMENT ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) IS
'wait for a transaction-scoped lock on a key (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
