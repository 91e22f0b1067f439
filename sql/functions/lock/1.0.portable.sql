/* locks.c's lock, in PL/pgSQL: the key's transaction-scoped advisory lock */
CREATE FUNCTION idempotency.lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_owner pg_catalog.text := idempotency.owner_name();
	-- a bad key is reported before a bad scope
	v_key pg_catalog.text := idempotency.portable_key_arg(lock.key);
	v_scope pg_catalog.text := idempotency.portable_scope(lock.scope);
BEGIN
	PERFORM pg_catalog.pg_advisory_xact_lock(idempotency.portable_lock_key(v_owner, v_scope, v_key));
END
$$;

COMMENT ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) IS
'wait for a transaction-scoped lock on a key (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
