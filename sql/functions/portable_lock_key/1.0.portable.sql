/*
 * 64 bits of SHA-256 over the installation's secret and a text: a lock
 * number nobody without the secret can compute, nor match to a guess.
 * Revoked from PUBLIC: the lock functions call it as its owner.
 */
CREATE FUNCTION idempotency.portable_secret_hash(value pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE sql STABLE STRICT PARALLEL SAFE
BEGIN ATOMIC
	SELECT ('x' OPERATOR(pg_catalog.||) pg_catalog.encode(pg_catalog.substr(pg_catalog.sha256(s.secret OPERATOR(pg_catalog.||)
				pg_catalog.convert_to(value, pg_catalog.current_setting('server_encoding'))), 1, 8), 'hex'))::pg_catalog.bit(64)::pg_catalog.int8
	  FROM idempotency.portable_secret AS s;
END;

COMMENT ON FUNCTION idempotency.portable_secret_hash(pg_catalog.text) IS
'64 bits of SHA-256 over the installation''s secret and a text';

REVOKE ALL ON FUNCTION idempotency.portable_secret_hash(pg_catalog.text) FROM PUBLIC;

/*
 * A key lock's advisory lock number: 64 bits of the keyed hash of its
 * owner, scope and key (each length-prefixed), so that no application's
 * keys collide with another's, and nobody without the installation's
 * secret can compute the number of a key, another application's or its
 * own, to take its lock first, nor confirm a guess of which key a lock in
 * pg_locks is (the C edition's tag has a field SQL cannot set, and a hash
 * seeded at server start).  The advisory space is one every role can take
 * locks in: a number seen in pg_locks while its lock is held can be taken
 * (doc/portable.md).  Revoked from PUBLIC: portable_key_lock() calls it as
 * its owner.  An owner whose role no longer exists (renamed under an
 * open session) is an error, as get_role_oid's in the C edition.
 */
CREATE FUNCTION idempotency.portable_lock_key(owner pg_catalog.text, scope pg_catalog.text, key pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE plpgsql STABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF pg_catalog.to_regrole(pg_catalog.quote_ident(owner)) IS NULL THEN
		RAISE EXCEPTION 'role "%" does not exist', owner USING ERRCODE = 'undefined_object';
	END IF;
	RETURN idempotency.portable_secret_hash('key:' OPERATOR(pg_catalog.||) pg_catalog.octet_length(owner) OPERATOR(pg_catalog.||) ':'
											OPERATOR(pg_catalog.||) owner OPERATOR(pg_catalog.||) pg_catalog.octet_length(scope)
											OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) scope OPERATOR(pg_catalog.||) key);
END
$$;

COMMENT ON FUNCTION idempotency.portable_lock_key(pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'the advisory lock number of an owner''s key lock, keyed with the installation''s secret';

REVOKE ALL ON FUNCTION idempotency.portable_lock_key(pg_catalog.text, pg_catalog.text, pg_catalog.text) FROM PUBLIC;

/*
 * The number of a caller's key lock, its arguments checked as lock_tag
 * checks them: whose lock first, then the key, then the scope.  SECURITY
 * DEFINER, to compute the number; lock() and try_lock() pass it their
 * caller and their own name, so that it checks the caller's grant of the
 * one called (portable_owner).
 */
CREATE FUNCTION idempotency.portable_key_lock(caller pg_catalog.name,
											  api pg_catalog.text,
											  key pg_catalog.text,
											  scope pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_api pg_catalog.regprocedure := CASE portable_key_lock.api
		WHEN 'lock' THEN 'idempotency.lock(pg_catalog.text, pg_catalog.text)'::pg_catalog.regprocedure
		WHEN 'try_lock' THEN 'idempotency.try_lock(pg_catalog.text, pg_catalog.text)'::pg_catalog.regprocedure END;
	v_owner pg_catalog.text;
	v_key pg_catalog.text;
	v_scope pg_catalog.text;
BEGIN
	IF v_api IS NULL THEN
		RAISE EXCEPTION 'api must be lock or try_lock' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	v_owner := idempotency.portable_owner(caller, v_api);
	v_key := idempotency.portable_key_arg(portable_key_lock.key);
	v_scope := idempotency.portable_scope(portable_key_lock.scope);
	RETURN idempotency.portable_lock_key(v_owner, v_scope, v_key);
END
$$;

COMMENT ON FUNCTION idempotency.portable_key_lock(pg_catalog.name, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'the number of a caller''s lock of a key in a scope, its arguments checked';
