/* locks.c's lock, in PL/pgSQL: the key's transaction-scoped advisory lock */
CREATE FUNCTION idempotency.lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM pg_catalog.pg_advisory_xact_lock(idempotency.portable_key_lock(lock.key, lock.scope));
END
$$;

COMMENT ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) IS
'wait for a transaction-scoped lock on a key (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
