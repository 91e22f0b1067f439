/*
 * roles.c's forget_role, in PL/pgSQL: every record, inbox entry, token and
 * outbox message stored under the name, and the name's standing as an
 * application role once no role has it.
 */
CREATE FUNCTION idempotency.portable_forget_role(caller pg_catalog.name,
												 role_name pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_name pg_catalog.text := idempotency.portable_role_name(portable_forget_role.role_name, 'role_name');
	deleted pg_catalog.int8 := 0;
	n pg_catalog.int8;
BEGIN
	-- only whether the session may act as the caller and the caller may
	-- call this, which portable_owner checks first (42501): whose records
	-- the caller's own are does not matter to an administrator, who may
	-- be no application role (the database owner who installed it)
	BEGIN
		PERFORM idempotency.portable_owner(caller, 'idempotency.forget_role(pg_catalog.text)');
	EXCEPTION WHEN SQLSTATE 'IK007' OR SQLSTATE 'IK008' THEN
		NULL;
	END;
	DELETE FROM idempotency.registry AS t WHERE t.owner OPERATOR(pg_catalog.=) v_name;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := deleted OPERATOR(pg_catalog.+) n;
	DELETE FROM idempotency.inbox AS t WHERE t.owner OPERATOR(pg_catalog.=) v_name;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := deleted OPERATOR(pg_catalog.+) n;
	DELETE FROM idempotency.tokens AS t WHERE t.owner OPERATOR(pg_catalog.=) v_name;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := deleted OPERATOR(pg_catalog.+) n;
	DELETE FROM idempotency.outbox AS t WHERE t.owner OPERATOR(pg_catalog.=) v_name;
	GET DIAGNOSTICS n = ROW_COUNT;
	deleted := deleted OPERATOR(pg_catalog.+) n;
	IF pg_catalog.to_regrole(pg_catalog.quote_ident(v_name)) IS NULL THEN
		DELETE FROM idempotency.application_roles AS a WHERE a.role_name OPERATOR(pg_catalog.=) v_name;
	END IF;
	RETURN deleted;
END
$$;

COMMENT ON FUNCTION idempotency.portable_forget_role(pg_catalog.name, pg_catalog.text) IS
'forget_role() for a caller, checked against the session';

CREATE FUNCTION idempotency.forget_role(role_name pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_forget_role(CURRENT_USER, role_name);

COMMENT ON FUNCTION idempotency.forget_role(pg_catalog.text) IS
'delete every record, inbox entry, token and outbox message stored under a role name in this database; returns how many';

REVOKE ALL ON FUNCTION idempotency.forget_role(pg_catalog.text) FROM PUBLIC;
