/*
 * finish.c's idempotent_abandon, in PL/pgSQL: the claim ends as
 * abandoned, expiring now, so that the next begin executes again.  The
 * body is SECURITY DEFINER; idempotent_abandon() passes it its caller.
 */
CREATE FUNCTION idempotency.portable_idempotent_abandon(caller pg_catalog.name,
														key pg_catalog.text,
														scope pg_catalog.text,
														attempt pg_catalog.int4)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_idempotent_abandon.key);
	v_scope pg_catalog.text := idempotency.portable_scope(portable_idempotent_abandon.scope);
BEGIN
	PERFORM idempotency.portable_end_claim(
		idempotency.portable_owner(caller, 'idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4)'),
		v_scope, v_key, portable_idempotent_abandon.attempt, 'abandoned', NULL, NULL, NULL, NULL, NULL);
END
$$;

COMMENT ON FUNCTION idempotency.portable_idempotent_abandon(pg_catalog.name, pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
'idempotent_abandon() for a caller, checked against the session';

CREATE FUNCTION idempotency.idempotent_abandon(key pg_catalog.text,
											   scope pg_catalog.text DEFAULT '',
											   attempt pg_catalog.int4 DEFAULT NULL)
RETURNS void
LANGUAGE sql VOLATILE PARALLEL UNSAFE
BEGIN ATOMIC
	SELECT idempotency.portable_idempotent_abandon(CURRENT_USER, key, scope, attempt);
END;

COMMENT ON FUNCTION idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4) IS
'give up a claim so that the next idempotent_begin executes again';

REVOKE ALL ON FUNCTION idempotency.idempotent_abandon(pg_catalog.text, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
