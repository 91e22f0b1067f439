/*
 * roles.c's rename_owner, in PL/pgSQL: everything stored under old_name
 * moved to new_name, each table's rows by one DELETE ... RETURNING feeding
 * an INSERT (one snapshot: a row written meanwhile moves whole or stays),
 * after checking every table first, so that a refusal moves nothing; and
 * the old name's standing as an application role goes with them.  The
 * body is SECURITY DEFINER; rename_owner() passes it its caller.
 */
CREATE FUNCTION idempotency.portable_rename_owner(caller pg_catalog.name,
												  old_name pg_catalog.text,
												  new_name pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_old pg_catalog.text := idempotency.portable_role_name(portable_rename_owner.old_name, 'old_name');
	v_new pg_catalog.text := idempotency.portable_role_name(portable_rename_owner.new_name, 'new_name');
	v_first pg_catalog.text;
	v_second pg_catalog.text;
	v_detail pg_catalog.text;
	moved pg_catalog.int8 := 0;
	n pg_catalog.int8;
BEGIN
	IF v_old OPERATOR(pg_catalog.=) v_new THEN
		RETURN 0;
	END IF;
	-- only whether the session may act as the caller and the caller may
	-- call this, which portable_owner checks first (42501): whose records
	-- the caller's own are does not matter to an administrator, who may
	-- be no application role (the database owner who installed it)
	BEGIN
		PERFORM idempotency.portable_owner(caller, 'idempotency.rename_owner(pg_catalog.text, pg_catalog.text)');
	EXCEPTION WHEN SQLSTATE 'IK007' OR SQLSTATE 'IK008' THEN
		NULL;
	END;

	-- a row of the old name whose natural key the new name holds refuses it
	SELECT o.scope, o.key INTO v_first, v_second FROM idempotency.registry AS o
	 WHERE o.owner OPERATOR(pg_catalog.=) v_old AND EXISTS (SELECT FROM idempotency.registry AS x
		WHERE x.owner OPERATOR(pg_catalog.=) v_new AND x.scope OPERATOR(pg_catalog.=) o.scope
		  AND x.key OPERATOR(pg_catalog.=) o.key) LIMIT 1;
	IF FOUND THEN
		v_detail := 'Role "%s" already has a record with key "%s" in scope "%s".';
	END IF;
	IF v_detail IS NULL THEN
		SELECT o.consumer, o.message_id INTO v_first, v_second FROM idempotency.inbox AS o
		 WHERE o.owner OPERATOR(pg_catalog.=) v_old AND EXISTS (SELECT FROM idempotency.inbox AS x
			WHERE x.owner OPERATOR(pg_catalog.=) v_new AND x.consumer OPERATOR(pg_catalog.=) o.consumer
			  AND x.message_id OPERATOR(pg_catalog.=) o.message_id) LIMIT 1;
		IF FOUND THEN
			v_detail := 'Role "%s" already has message "%s" in the inbox of consumer "%s".';
		END IF;
	END IF;
	IF v_detail IS NULL THEN
		SELECT o.scope, o.token INTO v_first, v_second FROM idempotency.tokens AS o
		 WHERE o.owner OPERATOR(pg_catalog.=) v_old AND EXISTS (SELECT FROM idempotency.tokens AS x
			WHERE x.owner OPERATOR(pg_catalog.=) v_new AND x.scope OPERATOR(pg_catalog.=) o.scope
			  AND x.token OPERATOR(pg_catalog.=) o.token) LIMIT 1;
		IF FOUND THEN
			v_detail := 'Role "%s" already has token "%s" in scope "%s".';
		END IF;
	END IF;
	IF v_detail IS NULL THEN
		-- two pending streams of one ordering key cannot be merged
		SELECT o.ordering_key, o.message_id INTO v_first, v_second FROM idempotency.outbox AS o
		 WHERE o.owner OPERATOR(pg_catalog.=) v_old AND EXISTS (SELECT FROM idempotency.outbox AS x
			WHERE x.owner OPERATOR(pg_catalog.=) v_new AND x.ordering_key OPERATOR(pg_catalog.=) o.ordering_key
			  AND (x.message_id OPERATOR(pg_catalog.=) o.message_id
				   OR (x.delivered_at IS NULL AND o.delivered_at IS NULL))) LIMIT 1;
		IF FOUND THEN
			v_detail := 'Role "%s" already has message "%s", or undelivered messages, under outbox ordering key "%s".';
		END IF;
	END IF;
	IF v_detail IS NOT NULL THEN
		RAISE EXCEPTION 'cannot move the records of role "%" to role "%"', v_old, v_new
			USING ERRCODE = 'unique_violation',
				  DETAIL = pg_catalog.format(v_detail, v_new, idempotency.portable_display(v_second), idempotency.portable_display(v_first)),
				  HINT = 'Forget the records of one of the two names with idempotency.forget_role(), or keep both names.';
	END IF;

	WITH m AS (DELETE FROM idempotency.registry AS t WHERE t.owner OPERATOR(pg_catalog.=) v_old RETURNING t)
	INSERT INTO idempotency.registry
	SELECT r.* FROM m, LATERAL pg_catalog.jsonb_populate_record(m.t, pg_catalog.jsonb_build_object('owner', v_new)) AS r;
	GET DIAGNOSTICS n = ROW_COUNT;
	moved := moved OPERATOR(pg_catalog.+) n;
	WITH m AS (DELETE FROM idempotency.inbox AS t WHERE t.owner OPERATOR(pg_catalog.=) v_old RETURNING t)
	INSERT INTO idempotency.inbox
	SELECT r.* FROM m, LATERAL pg_catalog.jsonb_populate_record(m.t, pg_catalog.jsonb_build_object('owner', v_new)) AS r;
	GET DIAGNOSTICS n = ROW_COUNT;
	moved := moved OPERATOR(pg_catalog.+) n;
	WITH m AS (DELETE FROM idempotency.tokens AS t WHERE t.owner OPERATOR(pg_catalog.=) v_old RETURNING t)
	INSERT INTO idempotency.tokens
	SELECT r.* FROM m, LATERAL pg_catalog.jsonb_populate_record(m.t, pg_catalog.jsonb_build_object('owner', v_new)) AS r;
	GET DIAGNOSTICS n = ROW_COUNT;
	moved := moved OPERATOR(pg_catalog.+) n;
	WITH m AS (DELETE FROM idempotency.outbox AS t WHERE t.owner OPERATOR(pg_catalog.=) v_old RETURNING t)
	INSERT INTO idempotency.outbox
	SELECT r.* FROM m, LATERAL pg_catalog.jsonb_populate_record(m.t, pg_catalog.jsonb_build_object('owner', v_new)) AS r;
	GET DIAGNOSTICS n = ROW_COUNT;
	moved := moved OPERATOR(pg_catalog.+) n;

	WITH m AS (DELETE FROM idempotency.application_roles AS a WHERE a.role_name OPERATOR(pg_catalog.=) v_old
			   RETURNING a.role_name)
	INSERT INTO idempotency.application_roles (role_name) SELECT v_new FROM m ON CONFLICT (role_name) DO NOTHING;
	RETURN moved;
END
$$;

COMMENT ON FUNCTION idempotency.portable_rename_owner(pg_catalog.name, pg_catalog.text, pg_catalog.text) IS
'rename_owner() for a caller, checked against the session';

CREATE FUNCTION idempotency.rename_owner(old_name pg_catalog.text, new_name pg_catalog.text)
RETURNS pg_catalog.int8
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_rename_owner(CURRENT_USER, old_name, new_name);

COMMENT ON FUNCTION idempotency.rename_owner(pg_catalog.text, pg_catalog.text) IS
'move every record, inbox entry, token and outbox message from one role name to another in this database; returns how many';

REVOKE ALL ON FUNCTION idempotency.rename_owner(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
