/*
 * A key lock's advisory lock number: the owner's role OID in the high 32
 * bits, so that no application's keys collide with another's, and a hash
 * of (scope, key) in the low 32, as locks.c's tag is made.  It lives in
 * the advisory lock space every role can take locks in (the C edition's has
 * a field SQL cannot set): a role that learns a number, from pg_locks while
 * the lock is held, can take it and make that key wait (doc/portable.md).
 */
CREATE FUNCTION idempotency.portable_lock_key(owner pg_catalog.text, scope pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE sql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT (pg_catalog.to_regrole(pg_catalog.quote_ident(owner))::pg_catalog.oid::pg_catalog.int8 OPERATOR(pg_catalog.<<) 32)
	   OPERATOR(pg_catalog.|)
	   (pg_catalog.hashtext(pg_catalog.octet_length(scope)::pg_catalog.text OPERATOR(pg_catalog.||) ':'
							OPERATOR(pg_catalog.||) scope OPERATOR(pg_catalog.||) key)::pg_catalog.int8
		OPERATOR(pg_catalog.&) 4294967295)
$$;

COMMENT ON FUNCTION idempotency.portable_lock_key(pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'the advisory lock number of an owner''s key lock';
