/* locks.c's try_lock, in SQL: the key's lock if it is free */
CREATE FUNCTION idempotency.try_lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN pg_catalog.pg_try_advisory_xact_lock(idempotency.portable_key_lock(CURRENT_USER, 'try_lock', key, scope));

COMMENT ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) IS
'take a transaction-scoped lock on a key if it is free (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
