/*
 * The argument checks the bodies share.  These and the other small helpers
 * a claim calls (portable_fence, portable_fingerprint, portable_key_check,
 * portable_max_wait_ms, portable_check_request) are neither SECURITY
 * DEFINER nor given a search_path of their own: every name in them is
 * qualified, they reach no table, and a function with a SET clause costs a
 * change of search_path, and a check of every cached plan against it, on
 * every call; called from a body, they run with its pg_catalog, pg_temp.
 */
/* a scope argument, checked as IdempotencyScopeArg checks it */
CREATE FUNCTION idempotency.portable_scope(scope pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
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
AS $$
BEGIN
	IF span IS NULL THEN
		RAISE EXCEPTION '% must not be null', name USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- too long to add (timestamptz's 22008 names no argument), measured as
	-- interval comparison measures it, as args.c does
	IF span OPERATOR(pg_catalog.>) pg_catalog.interval '100000 years' THEN
		RAISE EXCEPTION '% is out of range', name
			USING ERRCODE = 'invalid_parameter_value', DETAIL = 'It may be at most 100000 years.';
	END IF;
	IF span OPERATOR(pg_catalog.<) pg_catalog.interval '-1000 years'
	   OR now OPERATOR(pg_catalog.+) span OPERATOR(pg_catalog.<=) now THEN
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

/*
 * A setting of the C edition's (src/base/settings.c) as the portable
 * edition reads it: a plain placeholder setting, which no library defines,
 * so that any role may set it for its own session (doc/portable.md).  An
 * integer in the setting's base unit (kB or ms), or one with a unit of its
 * kind, as PostgreSQL writes them ('1MB', '250ms', '5s'); unset or empty,
 * the C edition's default.  Anything else, or a value out of [min, max],
 * is refused with the setting's name.
 */
CREATE FUNCTION idempotency.portable_setting(name pg_catalog.text, base_unit pg_catalog.text,
											 default_value pg_catalog.int8, min_value pg_catalog.int8,
											 max_value pg_catalog.int8)
RETURNS pg_catalog.int8
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
	v pg_catalog.text := pg_catalog.btrim(COALESCE(pg_catalog.current_setting(name, true), ''));
	number pg_catalog.text;
	unit pg_catalog.text;
	factor pg_catalog.numeric;
	result pg_catalog.numeric;
BEGIN
	IF v OPERATOR(pg_catalog.=) '' THEN
		RETURN default_value;
	END IF;
	-- the number and its unit split by trimming, and the number checked by
	-- a pattern without groups: regexp_match's groups cost a claim more
	-- than the rest of reading the setting
	number := pg_catalog.rtrim(v, 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');
	unit := pg_catalog.substr(v, pg_catalog.length(number) OPERATOR(pg_catalog.+) 1);
	number := pg_catalog.rtrim(number, E' \t\n\r\f\v');
	factor := CASE WHEN number OPERATOR(pg_catalog.!~) '^-?[0-9]+(\.[0-9]+)?$' THEN NULL
				   WHEN unit OPERATOR(pg_catalog.=) '' THEN 1
				   WHEN base_unit OPERATOR(pg_catalog.=) '' THEN NULL
				   WHEN base_unit OPERATOR(pg_catalog.=) 'kB' THEN
					   CASE unit WHEN 'B' THEN 1.0 / 1024 WHEN 'kB' THEN 1 WHEN 'MB' THEN 1024
								 WHEN 'GB' THEN 1024 * 1024 WHEN 'TB' THEN 1024 * 1024 * 1024 END
				   ELSE
					   CASE unit WHEN 'us' THEN 0.001 WHEN 'ms' THEN 1 WHEN 's' THEN 1000 WHEN 'min' THEN 60000
								 WHEN 'h' THEN 3600000 WHEN 'd' THEN 86400000 END END;
	IF factor IS NULL THEN
		RAISE EXCEPTION 'invalid value for parameter "%": "%"', name, v
			USING ERRCODE = 'invalid_parameter_value',
				  HINT = CASE base_unit WHEN 'kB' THEN 'Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".'
						 WHEN 'ms' THEN 'Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".'
						 ELSE 'It takes an integer.' END;
	END IF;
	result := pg_catalog.round(number::pg_catalog.numeric OPERATOR(pg_catalog.*) factor);
	IF result OPERATOR(pg_catalog.<) min_value OR result OPERATOR(pg_catalog.>) max_value THEN
		RAISE EXCEPTION '% is outside the valid range for parameter "%" (% .. %)',
			result::pg_catalog.text OPERATOR(pg_catalog.||) CASE WHEN base_unit OPERATOR(pg_catalog.=) '' THEN ''
															ELSE ' ' OPERATOR(pg_catalog.||) base_unit END,
			name, min_value, max_value
			USING ERRCODE = 'invalid_parameter_value';
	END IF;
	RETURN result;
END
$$;

COMMENT ON FUNCTION idempotency.portable_setting(pg_catalog.text, pg_catalog.text, pg_catalog.int8, pg_catalog.int8, pg_catalog.int8) IS
'a setting of the C edition, read from a plain setting in its base unit, with its default';
