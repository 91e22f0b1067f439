/*
 * tokens.c's issue_token, in PL/pgSQL: "tk_" and 128 random bits in hex.
 * SQL's source of strong random bits is gen_random_uuid(), whose version 4
 * UUIDs carry 122: the random hex digits of two of them, without the fixed
 * version digit and the variant digit, give the 32 that a token needs.
 */
CREATE FUNCTION idempotency.portable_issue_token(caller pg_catalog.name,
												 scope pg_catalog.text,
												 ttl pg_catalog.interval)
RETURNS idempotency.key
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_scope pg_catalog.text := idempotency.portable_scope(portable_issue_token.scope);
	v_random pg_catalog.text;
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_token pg_catalog.text;
BEGIN
	IF portable_issue_token.ttl IS NULL THEN
		RAISE EXCEPTION 'ttl must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- of each UUID's 32 hex digits, all but the 13th and the 17th
	SELECT pg_catalog.string_agg(pg_catalog.substr(u.h, 1, 12) OPERATOR(pg_catalog.||) pg_catalog.substr(u.h, 14, 3)
								 OPERATOR(pg_catalog.||) pg_catalog.substr(u.h, 18), '')
	  INTO v_random
	  FROM (SELECT pg_catalog.replace(pg_catalog.gen_random_uuid()::pg_catalog.text, '-', '')
			  FROM pg_catalog.generate_series(1, 2)) AS u(h);
	v_token := 'tk_' OPERATOR(pg_catalog.||) pg_catalog.left(v_random, 32);
	v_owner := idempotency.portable_owner(caller, 'idempotency.issue_token(pg_catalog.text, pg_catalog.interval)');
	v_now := pg_catalog.clock_timestamp();
	INSERT INTO idempotency.tokens (owner, scope, token, issued_at, expires_at)
	VALUES (v_owner, v_scope, v_token, v_now, idempotency.portable_after(v_now, portable_issue_token.ttl, 'ttl'));
	RETURN v_token;
END
$$;

COMMENT ON FUNCTION idempotency.portable_issue_token(pg_catalog.name, pg_catalog.text, pg_catalog.interval) IS
'issue_token() for a caller, checked against the session';

CREATE FUNCTION idempotency.issue_token(scope pg_catalog.text DEFAULT '',
										ttl pg_catalog.interval DEFAULT '10 minutes')
RETURNS idempotency.key
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_issue_token(CURRENT_USER, scope, ttl);

COMMENT ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) IS
'a new one-time token (128 random bits) for the calling role';

REVOKE ALL ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
