/* locks.c's try_lock, in PL/pgSQL: the key's lock if it is free */
CREATE FUNCTION idempotency.try_lock(key pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_owner pg_catalog.text := idempotency.owner_name();
	-- a bad key is reported before a bad scope
	v_key pg_catalog.text := idempotency.portable_key_arg(try_lock.key);
	v_scope pg_catalog.text := idempotency.portable_scope(try_lock.scope);
BEGIN
	RETURN pg_catalog.pg_try_advisory_xact_lock(idempotency.portable_lock_key(v_owner, v_scope, v_key));
END
$$;

COMMENT ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) IS
'take a transaction-scoped lock on a key if it is free (node-local advisory lock)';

REVOKE ALL ON FUNCTION idempotency.try_lock(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
