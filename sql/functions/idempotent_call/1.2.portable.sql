/*
 * begin.c's idempotent_call, in PL/pgSQL: a transactional claim, the
 * handler run on the request if the answer is execute, and a finish with
 * what it returned.  The handler must run as the caller, with the caller's
 * settings, as a call from SQL would: so idempotent_call() itself is a
 * SECURITY INVOKER function without settings of its own, which checks and
 * runs the handler, and claims and finishes through SECURITY DEFINER
 * bodies that it passes its caller (portable_owner).  The finish body
 * finishes only a claim idempotent_call took in this transaction.
 */
CREATE FUNCTION idempotency.portable_call_begin(caller pg_catalog.name,
												key pg_catalog.text,
												request pg_catalog.jsonb,
												scope pg_catalog.text,
												ttl pg_catalog.interval,
												max_wait pg_catalog.interval,
												OUT outcome pg_catalog.text,
												OUT status pg_catalog.text,
												OUT response pg_catalog.jsonb,
												OUT attempt pg_catalog.int4,
												OUT retry_after pg_catalog.int4)
RETURNS pg_catalog.record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	SELECT c.outcome, c.status, c.response, c.attempt, c.retry_after
	  INTO outcome, status, response, attempt, retry_after
	  FROM idempotency.portable_idempotent_begin(caller, true, portable_call_begin.key, portable_call_begin.scope, portable_call_begin.request,
									  portable_call_begin.ttl, NULL, true, false, portable_call_begin.max_wait, false, false) AS c;
END
$$;

COMMENT ON FUNCTION idempotency.portable_call_begin(pg_catalog.name, pg_catalog.text, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.interval) IS
'idempotent_call()''s claim for a caller, checked against the session';

CREATE FUNCTION idempotency.portable_call_finish(caller pg_catalog.name,
												 key pg_catalog.text,
												 scope pg_catalog.text,
												 response pg_catalog.jsonb)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_call_finish.key);
	v_scope pg_catalog.text := idempotency.portable_scope(portable_call_finish.scope);
	v_limit pg_catalog.int8 := idempotency.portable_setting('idempotency.max_response_size', 'kB', 1024, 1, 2147483647);
BEGIN
	IF pg_catalog.pg_column_size(portable_call_finish.response) OPERATOR(pg_catalog.>) (v_limit OPERATOR(pg_catalog.*) 1024) THEN
		RAISE EXCEPTION 'response for idempotency key "%" is too large to store', idempotency.portable_display(v_key)
			USING ERRCODE = 'program_limit_exceeded',
				  DETAIL = pg_catalog.format('The response, body and headers take %s bytes; "idempotency.max_response_size" allows %s kB.',
											 pg_catalog.pg_column_size(portable_call_finish.response), v_limit);
	END IF;
	PERFORM idempotency.portable_end_claim(
		idempotency.portable_owner(caller, 'idempotency.idempotent_call(pg_catalog.text, pg_catalog.regprocedure, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.interval)'),
		v_scope, v_key, NULL, 'completed', portable_call_finish.response, NULL, NULL, NULL, NULL, true);
END
$$;

COMMENT ON FUNCTION idempotency.portable_call_finish(pg_catalog.name, pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) IS
'idempotent_call()''s finish for a caller, of a claim it took in this transaction';

CREATE FUNCTION idempotency.idempotent_call(key pg_catalog.text,
											handler pg_catalog.regprocedure,
											request pg_catalog.jsonb DEFAULT NULL,
											scope pg_catalog.text DEFAULT '',
											ttl pg_catalog.interval DEFAULT '24 hours',
											max_wait pg_catalog.interval DEFAULT NULL,
											OUT outcome pg_catalog.text,
											OUT status pg_catalog.text,
											OUT response pg_catalog.jsonb,
											OUT attempt pg_catalog.int4,
											OUT retry_after pg_catalog.int4)
RETURNS pg_catalog.record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
DECLARE
	p pg_catalog.pg_proc;
	v_call pg_catalog.text;
BEGIN
	PERFORM idempotency.portable_key_arg(idempotent_call.key);
	IF idempotent_call.handler IS NULL THEN
		RAISE EXCEPTION 'handler must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	PERFORM idempotency.portable_scope(idempotent_call.scope);
	IF idempotent_call.ttl IS NULL THEN
		RAISE EXCEPTION 'ttl must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	-- the handler: a plain function of one jsonb returning jsonb that the
	-- caller may execute (begin.c's call_check_handler)
	SELECT * INTO p FROM pg_catalog.pg_proc AS f WHERE f.oid OPERATOR(pg_catalog.=) idempotent_call.handler;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'function with OID % does not exist', idempotent_call.handler::pg_catalog.oid
			USING ERRCODE = 'undefined_function';
	END IF;
	IF p.prokind OPERATOR(pg_catalog.<>) 'f' OR p.proretset THEN
		RAISE EXCEPTION 'handler % is not a function returning one value', idempotent_call.handler
			USING ERRCODE = 'wrong_object_type',
				  HINT = 'The handler is a function taking the request as jsonb and returning the response as jsonb.';
	END IF;
	IF p.pronargs OPERATOR(pg_catalog.<>) 1 OR p.proargtypes[0] OPERATOR(pg_catalog.<>) 'pg_catalog.jsonb'::pg_catalog.regtype
	   OR p.prorettype OPERATOR(pg_catalog.<>) 'pg_catalog.jsonb'::pg_catalog.regtype THEN
		RAISE EXCEPTION 'handler % must take one jsonb argument and return jsonb', idempotent_call.handler
			USING ERRCODE = 'datatype_mismatch';
	END IF;
	IF p.proisstrict AND idempotent_call.request IS NULL THEN
		RAISE EXCEPTION 'handler % is STRICT, and the request is null', idempotent_call.handler
			USING ERRCODE = 'null_value_not_allowed',
				  DETAIL = 'A STRICT function is not run on a null argument, so the key would be finished without its work.';
	END IF;
	IF NOT pg_catalog.has_function_privilege(idempotent_call.handler, 'EXECUTE') THEN
		RAISE EXCEPTION 'permission denied for function %', p.proname USING ERRCODE = 'insufficient_privilege';
	END IF;

	SELECT c.outcome, c.status, c.response, c.attempt, c.retry_after
	  INTO outcome, status, response, attempt, retry_after
	  FROM idempotency.portable_call_begin(CURRENT_USER, idempotent_call.key, idempotent_call.request,
										   idempotent_call.scope, idempotent_call.ttl, idempotent_call.max_wait) AS c;
	IF outcome OPERATOR(pg_catalog.=) 'execute' THEN
		v_call := pg_catalog.format('SELECT %I.%I($1)', (SELECT n.nspname FROM pg_catalog.pg_namespace AS n
														  WHERE n.oid OPERATOR(pg_catalog.=) p.pronamespace), p.proname);
		EXECUTE v_call INTO response USING idempotent_call.request;
		PERFORM idempotency.portable_call_finish(CURRENT_USER, idempotent_call.key, idempotent_call.scope, response);
		status := 'completed';
	END IF;
END
$$;

COMMENT ON FUNCTION idempotency.idempotent_call IS
'run a handler function under an idempotency key: execute (the handler ran), replay or in_progress';

REVOKE ALL ON FUNCTION idempotency.idempotent_call FROM PUBLIC;
