/*
 * finish.c's idempotent_finish, in PL/pgSQL: the same argument checks, then
 * the end of the claim (portable_end_claim).  The body is SECURITY
 * DEFINER; idempotent_finish() passes it its caller (portable_owner).
 */
CREATE FUNCTION idempotency.portable_idempotent_finish(caller pg_catalog.name,
													   key pg_catalog.text,
													   response pg_catalog.jsonb,
													   scope pg_catalog.text,
													   attempt pg_catalog.int4,
													   failed pg_catalog.bool,
													   status_code pg_catalog.int4,
													   body pg_catalog.bytea,
													   ttl pg_catalog.interval,
													   headers pg_catalog.jsonb)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_idempotent_finish.key);
	v_scope pg_catalog.text := idempotency.portable_scope(portable_idempotent_finish.scope);
	v_size pg_catalog.int8 := 0;
	v_limit pg_catalog.int8;
BEGIN
	IF portable_idempotent_finish.failed IS NULL THEN
		RAISE EXCEPTION 'failed must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	v_size := COALESCE(pg_catalog.pg_column_size(portable_idempotent_finish.response), 0);
	IF portable_idempotent_finish.status_code IS NOT NULL
	   AND portable_idempotent_finish.status_code NOT BETWEEN 100 AND 599 THEN
		RAISE EXCEPTION 'status_code must be between 100 and 599'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = pg_catalog.format('It is %s.', portable_idempotent_finish.status_code);
	END IF;
	v_size := v_size OPERATOR(pg_catalog.+) COALESCE(pg_catalog.octet_length(portable_idempotent_finish.body), 0);
	IF portable_idempotent_finish.headers IS NOT NULL THEN
		PERFORM idempotency.portable_headers_check(portable_idempotent_finish.headers);
		v_size := v_size OPERATOR(pg_catalog.+) pg_catalog.pg_column_size(portable_idempotent_finish.headers);
	END IF;
	-- (no answer of 1 kB or less can be over the limit, which is at least
	-- that: the setting is read only for a larger one)
	IF v_size OPERATOR(pg_catalog.>) 1024 THEN
		v_limit := idempotency.portable_setting('idempotency.max_response_size', 'kB', 1024, 1, 2147483647);
	END IF;
	IF v_size OPERATOR(pg_catalog.>) (v_limit OPERATOR(pg_catalog.*) 1024) THEN
		RAISE EXCEPTION 'response for idempotency key "%" is too large to store', idempotency.portable_display(v_key)
			USING ERRCODE = 'program_limit_exceeded',
				  DETAIL = pg_catalog.format('The response, body and headers take %s bytes; "idempotency.max_response_size" allows %s kB.', v_size, v_limit);
	END IF;
	PERFORM idempotency.portable_end_claim(
		idempotency.portable_owner(caller, 'idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb)'),
		v_scope, v_key, portable_idempotent_finish.attempt,
		CASE WHEN portable_idempotent_finish.failed THEN 'failed' ELSE 'completed' END,
		portable_idempotent_finish.response, portable_idempotent_finish.status_code,
		portable_idempotent_finish.body, portable_idempotent_finish.headers, portable_idempotent_finish.ttl);
	RETURN CASE WHEN portable_idempotent_finish.failed THEN 'failed' ELSE 'completed' END;
END
$$;

COMMENT ON FUNCTION idempotency.portable_idempotent_finish(pg_catalog.name, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) IS
'idempotent_finish() for a caller, checked against the session';

CREATE FUNCTION idempotency.idempotent_finish(key pg_catalog.text,
											  response pg_catalog.jsonb,
											  scope pg_catalog.text DEFAULT '',
											  attempt pg_catalog.int4 DEFAULT NULL,
											  failed pg_catalog.bool DEFAULT false,
											  status_code pg_catalog.int4 DEFAULT NULL,
											  body pg_catalog.bytea DEFAULT NULL,
											  ttl pg_catalog.interval DEFAULT NULL,
											  headers pg_catalog.jsonb DEFAULT NULL)
RETURNS pg_catalog.text
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_idempotent_finish(CURRENT_USER, key, response, scope, attempt, failed,
											  status_code, body, ttl, headers);

COMMENT ON FUNCTION idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) IS
'store the response of a claimed key, to be replayed to every retry; returns the status stored, completed or failed';

REVOKE ALL ON FUNCTION idempotency.idempotent_finish(pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4, pg_catalog.bool, pg_catalog.int4, pg_catalog.bytea, pg_catalog.interval, pg_catalog.jsonb) FROM PUBLIC;
