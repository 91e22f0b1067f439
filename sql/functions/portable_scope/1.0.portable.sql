/* a scope argument, checked as IdempotencyScopeArg checks it */
CREATE FUNCTION idempotency.portable_scope(scope pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF scope IS NULL THEN
		RAISE EXCEPTION 'scope must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.octet_length(scope) OPERATOR(pg_catalog.>) 255 THEN
		RAISE EXCEPTION 'scope must be at most 255 bytes long' USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN scope;
END
$$;

COMMENT ON FUNCTION idempotency.portable_scope(pg_catalog.text) IS
'a scope argument, checked: not null, at most 255 bytes';
