/*
 * recovery.c's idempotent_checkpoint, in PL/pgSQL: the step the caller's
 * claim has reached and its state, fenced as a finish is.  The body is
 * SECURITY DEFINER; idempotent_checkpoint() passes it its caller.
 */
CREATE FUNCTION idempotency.portable_idempotent_checkpoint(caller pg_catalog.name,
														   key pg_catalog.text,
														   recovery_point pg_catalog.text,
														   recovery_state pg_catalog.jsonb,
														   scope pg_catalog.text,
														   attempt pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_idempotent_checkpoint.key);
	v_point pg_catalog.text := idempotency.portable_text_arg(portable_idempotent_checkpoint.recovery_point, 'recovery_point');
	v_limit pg_catalog.int8 := idempotency.portable_setting('idempotency.max_response_size', 'kB', 1024, 1, 2147483647);
	v_scope pg_catalog.text;
	v_owner pg_catalog.text;
	v_attempt pg_catalog.int4 := portable_idempotent_checkpoint.attempt;
	mine record;
	n pg_catalog.int8 := 0;
BEGIN
	IF pg_catalog.pg_column_size(portable_idempotent_checkpoint.recovery_state) OPERATOR(pg_catalog.>) (v_limit OPERATOR(pg_catalog.*) 1024) THEN
		RAISE EXCEPTION 'recovery state for idempotency key "%" is too large to store', idempotency.portable_display(v_key)
			USING ERRCODE = 'program_limit_exceeded',
				  DETAIL = pg_catalog.format('It takes %s bytes; "idempotency.max_response_size" allows %s kB.',
											 pg_catalog.pg_column_size(portable_idempotent_checkpoint.recovery_state), v_limit);
	END IF;
	v_scope := idempotency.portable_scope(portable_idempotent_checkpoint.scope);
	v_owner := idempotency.portable_owner(caller, 'idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4)');
	mine := idempotency.portable_own_attempt(v_owner, v_scope, v_key, v_attempt, 'record a recovery point of');
	v_attempt := COALESCE(mine.attempt, v_attempt);
	IF v_attempt IS NOT NULL THEN
		UPDATE idempotency.registry AS r
		   SET recovery_point = v_point, recovery_state = portable_idempotent_checkpoint.recovery_state,
			   updated_at = pg_catalog.clock_timestamp()
		 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
		   AND r.owner OPERATOR(pg_catalog.=) v_owner
		   AND r.status OPERATOR(pg_catalog.=) 'processing' AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
		   AND r.attempt OPERATOR(pg_catalog.=) v_attempt;
		GET DIAGNOSTICS n = ROW_COUNT;
	END IF;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		PERFORM idempotency.portable_explain_miss(v_owner, v_scope, v_key, v_attempt, NULL, NULL, NULL, NULL, NULL,
												  'recording a recovery point of');
	END IF;
	RETURN v_point;
END
$$;

COMMENT ON FUNCTION idempotency.portable_idempotent_checkpoint(pg_catalog.name, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) IS
'idempotent_checkpoint() for a caller, checked against the session';

CREATE FUNCTION idempotency.idempotent_checkpoint(key pg_catalog.text,
												  recovery_point pg_catalog.text,
												  recovery_state pg_catalog.jsonb DEFAULT NULL,
												  scope pg_catalog.text DEFAULT '',
												  attempt pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.text
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_idempotent_checkpoint(CURRENT_USER, key, recovery_point, recovery_state, scope, attempt);

COMMENT ON FUNCTION idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) IS
'record the step a claim has reached and its state, with the step''s own writes; a take-over resumes from it';

REVOKE ALL ON FUNCTION idempotency.idempotent_checkpoint(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
