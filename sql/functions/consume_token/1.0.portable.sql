/*
 * tokens.c's consume_token, in PL/pgSQL: true exactly once while unexpired;
 * a second consumer waits for the first's row lock and then sees it used.
 */
CREATE FUNCTION idempotency.portable_consume_token(caller pg_catalog.name,
												   token pg_catalog.text,
												   scope pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_token pg_catalog.text;
	v_scope pg_catalog.text;
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	n pg_catalog.int8;
BEGIN
	IF portable_consume_token.token IS NULL THEN
		RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	v_token := idempotency.key(portable_consume_token.token);
	v_scope := idempotency.portable_scope(portable_consume_token.scope);
	v_owner := idempotency.portable_owner(caller, 'idempotency.consume_token(pg_catalog.text, pg_catalog.text)');
	v_now := pg_catalog.clock_timestamp();
	UPDATE idempotency.tokens AS t SET consumed_at = v_now
	 WHERE t.token OPERATOR(pg_catalog.=) v_token AND t.scope OPERATOR(pg_catalog.=) v_scope
	   AND t.owner OPERATOR(pg_catalog.=) v_owner
	   AND t.consumed_at IS NULL AND t.expires_at OPERATOR(pg_catalog.>) v_now;
	GET DIAGNOSTICS n = ROW_COUNT;
	RETURN n OPERATOR(pg_catalog.=) 1;
END
$$;

COMMENT ON FUNCTION idempotency.portable_consume_token(pg_catalog.name, pg_catalog.text, pg_catalog.text) IS
'consume_token() for a caller, checked against the session';

CREATE FUNCTION idempotency.consume_token(token pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_consume_token(CURRENT_USER, token, scope);

COMMENT ON FUNCTION idempotency.consume_token(pg_catalog.text, pg_catalog.text) IS
'true exactly once for an unexpired token; false for used, expired or unknown tokens alike';

REVOKE ALL ON FUNCTION idempotency.consume_token(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
