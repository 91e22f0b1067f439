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

/* a text argument, checked as IdempotencyTextArg checks it */
CREATE FUNCTION idempotency.portable_text_arg(value pg_catalog.text, name pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF value IS NULL THEN
		RAISE EXCEPTION '% must not be null', name USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF pg_catalog.octet_length(value) OPERATOR(pg_catalog.=) 0 OR pg_catalog.octet_length(value) OPERATOR(pg_catalog.>) 255 THEN
		RAISE EXCEPTION '% must be 1 to 255 bytes long', name USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN value;
END
$$;

COMMENT ON FUNCTION idempotency.portable_text_arg(pg_catalog.text, pg_catalog.text) IS
'a text argument, checked: not null, 1 to 255 bytes';

/* now + an interval that must be positive, as IdempotencyAddPositive */
CREATE FUNCTION idempotency.portable_after(now pg_catalog.timestamptz, span pg_catalog.interval, name pg_catalog.text)
RETURNS pg_catalog.timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF span IS NULL THEN
		RAISE EXCEPTION '% must not be null', name USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF now OPERATOR(pg_catalog.+) span OPERATOR(pg_catalog.<=) now THEN
		RAISE EXCEPTION '% must be a positive interval', name USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN now OPERATOR(pg_catalog.+) span;
END
$$;

COMMENT ON FUNCTION idempotency.portable_after(pg_catalog.timestamptz, pg_catalog.interval, pg_catalog.text) IS
'now plus a positive interval, checked';

/* a key argument, checked as IdempotencyKeyArg checks it */
CREATE FUNCTION idempotency.portable_key_arg(value pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF value IS NULL THEN
		RAISE EXCEPTION 'idempotency key must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	RETURN idempotency.key(value);
END
$$;

COMMENT ON FUNCTION idempotency.portable_key_arg(pg_catalog.text) IS
'a key argument, checked: not null, the key type''s rules';

/* a role name argument, checked as roles.c's roles_name_arg checks it */
CREATE FUNCTION idempotency.portable_role_name(value pg_catalog.text, name pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF value IS NULL THEN
		RAISE EXCEPTION '% must not be null', name USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF value OPERATOR(pg_catalog.=) '' THEN
		RAISE EXCEPTION '% must not be empty', name USING ERRCODE = 'invalid_parameter_value';
	END IF;
	IF pg_catalog.octet_length(value) OPERATOR(pg_catalog.>=) 64 THEN
		RAISE EXCEPTION '% "%" is too long', name, value
			USING ERRCODE = 'name_too_long', DETAIL = 'Role names are at most 63 bytes long.';
	END IF;
	RETURN value;
END
$$;

COMMENT ON FUNCTION idempotency.portable_role_name(pg_catalog.text, pg_catalog.text) IS
'a role name argument, checked: not null, not empty, at most 63 bytes';
