/*
 * roles.c's forget_key, in PL/pgSQL: the same reading first, refusal of a
 * claim not finished without force, delete of the version read only, and
 * log line naming the caller (passed by forget_key(), as portable_owner
 * describes).
 * The statistics are not kept here.
 */
CREATE FUNCTION idempotency.portable_forget_key(caller pg_catalog.name,
												role_name pg_catalog.text,
												key pg_catalog.text,
												scope pg_catalog.text,
												force pg_catalog.bool)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_role pg_catalog.text := idempotency.portable_role_name(portable_forget_key.role_name, 'role_name');
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_forget_key.key);
	v_scope pg_catalog.text := idempotency.portable_scope(portable_forget_key.scope);
	v_attempt pg_catalog.int4;
	v_updated pg_catalog.timestamptz;
	v_claimed pg_catalog.bool;
	n pg_catalog.int8;
BEGIN
	IF portable_forget_key.force IS NULL THEN
		RAISE EXCEPTION 'force must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- only whether the session may act as the caller and the caller may
	-- call this, which portable_owner checks first (42501): whose records
	-- the caller's own are does not matter to an administrator, who may
	-- be no application role (the database owner who installed it)
	BEGIN
		PERFORM idempotency.portable_owner(caller, 'idempotency.forget_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.bool)');
	EXCEPTION WHEN SQLSTATE 'IK007' OR SQLSTATE 'IK008' THEN
		NULL;
	END;
	SELECT r.attempt, r.updated_at,
		   r.status OPERATOR(pg_catalog.=) 'processing' AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
	  INTO v_attempt, v_updated, v_claimed
	  FROM idempotency.registry AS r
	 WHERE r.owner OPERATOR(pg_catalog.=) v_role AND r.key OPERATOR(pg_catalog.=) v_key
	   AND r.scope OPERATOR(pg_catalog.=) v_scope;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	IF v_claimed AND NOT portable_forget_key.force THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" of role "%" is claimed and not finished',
			idempotency.portable_display(v_key), idempotency.portable_display(v_scope), idempotency.portable_display(v_role)
			USING ERRCODE = 'object_in_use',
				  DETAIL = 'Its holder may be doing the work now; a request after the record is gone would do it again.',
				  HINT = 'Let the claim finish, or its lease run out and take it over; force => true deletes it anyway.';
	END IF;
	DELETE FROM idempotency.registry AS r
	 WHERE r.owner OPERATOR(pg_catalog.=) v_role AND r.key OPERATOR(pg_catalog.=) v_key
	   AND r.scope OPERATOR(pg_catalog.=) v_scope
	   AND r.attempt OPERATOR(pg_catalog.=) v_attempt AND r.updated_at OPERATOR(pg_catalog.=) v_updated;
	GET DIAGNOSTICS n = ROW_COUNT;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		RAISE EXCEPTION 'the record of idempotency key "%" in scope "%" of role "%" changed while forget_key waited for it',
			idempotency.portable_display(v_key), idempotency.portable_display(v_scope), idempotency.portable_display(v_role)
			USING ERRCODE = '40001',
				  DETAIL = 'Another transaction finished, took over or deleted it; nothing was deleted.',
				  HINT = 'Call forget_key again to forget what the key holds now.';
	END IF;
	RAISE LOG 'idempotency: role "%" forgot the record of key "%" in scope "%" of role "%"',
		idempotency.portable_display(caller),
		idempotency.portable_display(v_key), idempotency.portable_display(v_scope), idempotency.portable_display(v_role);
	RETURN true;
END
$$;

COMMENT ON FUNCTION idempotency.portable_forget_key(pg_catalog.name, pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.bool) IS
'forget_key() for a caller, checked against the session';

CREATE FUNCTION idempotency.forget_key(role_name pg_catalog.text,
									   key pg_catalog.text,
									   scope pg_catalog.text DEFAULT '',
									   force pg_catalog.bool DEFAULT false)
RETURNS pg_catalog.bool
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_forget_key(CURRENT_USER, role_name, key, scope, force);

COMMENT ON FUNCTION idempotency.forget_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.bool) IS
'delete the record of one key of a role in this database, so that its next request executes; a claim not finished only with force; counted in stats.keys_forgotten';

REVOKE ALL ON FUNCTION idempotency.forget_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.bool) FROM PUBLIC;
