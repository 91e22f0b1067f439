/*
 * begin.c's idempotent_begin, in PL/pgSQL: the same answers, with one
 * difference in how a claim is held.  Every claim is written at begin, as
 * the C edition writes an external claim or one under REPEATABLE READ (it
 * has no lock space of its own to hold a claim in memory): INSERT ... ON
 * CONFLICT DO NOTHING waits for a concurrent uncommitted claim of the key,
 * and then either conflicts (the other committed: read and replay) or goes
 * in (it rolled back: execute).  An expired or abandoned record is
 * overwritten, and a lapsed lease taken over, by UPDATEs that re-check
 * what was read, as begin.c's do; attempts grow from the clock's seconds
 * (portable_fence).  A defer_claim claim is written at begin too (the C
 * edition writes it at finish).  A bounded wait (wait => false, max_wait,
 * or the setting idempotency.max_wait, default 5s) runs the claim in a
 * block whose lock waits time out: in_progress.  The claim is remembered
 * in portable_claims for its finish and for the commit rule.
 *
 * The body of idempotent_begin, for its caller (portable_owner), and of
 * idempotent_call's claim (for_call: kind call, the caller checked against
 * that function's grant instead): one body, not a body calling the claim,
 * because each call between them costs a claim a statement.
 */
CREATE FUNCTION idempotency.portable_idempotent_begin(caller pg_catalog.name,
										   for_call pg_catalog.bool,
										   key pg_catalog.text,
										   scope pg_catalog.text,
										   request pg_catalog.jsonb,
										   ttl pg_catalog.interval,
										   lease pg_catalog.interval,
										   wait pg_catalog.bool,
										   require_token pg_catalog.bool,
										   max_wait pg_catalog.interval,
										   defer_claim pg_catalog.bool,
										   external pg_catalog.bool,
										   OUT outcome pg_catalog.text,
										   OUT status pg_catalog.text,
										   OUT response pg_catalog.jsonb,
										   OUT attempt pg_catalog.int4,
										   OUT expires_at pg_catalog.timestamptz,
										   OUT lease_until pg_catalog.timestamptz,
										   OUT status_code pg_catalog.int4,
										   OUT body pg_catalog.bytea,
										   OUT headers pg_catalog.jsonb,
										   OUT previous_attempt pg_catalog.int4,
										   OUT previous_end pg_catalog.text,
										   OUT retry_after pg_catalog.int4,
										   OUT recovery_point pg_catalog.text,
										   OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_idempotent_begin.key);
	v_scope pg_catalog.text := idempotency.portable_scope(portable_idempotent_begin.scope);
	v_fingerprint pg_catalog.bytea;
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_expires pg_catalog.timestamptz;
	v_lease pg_catalog.timestamptz;
	v_kind pg_catalog.text;
	v_timeout pg_catalog.int8;
	v_table_timeout pg_catalog.int8;
	-- the caller's lock_timeout, given back after each bounded block: a
	-- SET LOCAL in a block that succeeds would outlive the call
	v_caller_timeout pg_catalog.text := pg_catalog.current_setting('lock_timeout');
	v_read_only pg_catalog.bool := pg_catalog.current_setting('transaction_read_only')::pg_catalog.bool;
	v_answered pg_catalog.bool := false;
	v_timed_out pg_catalog.bool := false;
	v_fence pg_catalog.int4;
	v_found pg_catalog.bool;
	rec idempotency.registry;
	n pg_catalog.int8;
BEGIN
	IF portable_idempotent_begin.request IS NOT NULL THEN
		v_fingerprint := idempotency.portable_fingerprint(portable_idempotent_begin.request);
	END IF;
	IF portable_idempotent_begin.ttl IS NULL THEN
		RAISE EXCEPTION 'ttl must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF portable_idempotent_begin.wait IS NULL THEN
		RAISE EXCEPTION 'wait must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF portable_idempotent_begin.require_token IS NULL THEN
		RAISE EXCEPTION 'require_token must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;

	-- how long to wait for another transaction's claim, in ms (0: as long
	-- as it takes), as begin_lock_timeout
	v_timeout := CASE WHEN portable_idempotent_begin.wait
					  THEN idempotency.portable_max_wait_ms(portable_idempotent_begin.max_wait) ELSE 1 END;

	IF portable_idempotent_begin.defer_claim IS NULL THEN
		RAISE EXCEPTION 'defer_claim must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF portable_idempotent_begin.external IS NULL THEN
		RAISE EXCEPTION 'external must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF portable_idempotent_begin.defer_claim AND portable_idempotent_begin.external THEN
		RAISE EXCEPTION 'defer_claim and external cannot both be true'
			USING ERRCODE = 'invalid_parameter_value',
				  DETAIL = 'A deferred claim is written by its finish in the transaction that took it, so it cannot serve work outside the database.';
	END IF;
	-- 1.0's rule, kept by idempotency.commit_rule while clients written for
	-- 1.0 move: a written claim may commit unfinished, its lease bounding it
	v_kind := CASE WHEN portable_idempotent_begin.for_call THEN 'call' WHEN portable_idempotent_begin.defer_claim THEN 'deferred'
				   WHEN portable_idempotent_begin.external THEN 'external'
				   WHEN pg_catalog.current_setting('idempotency.commit_rule', true) OPERATOR(pg_catalog.=) 'lease_is_external'
				   THEN 'external' ELSE 'transactional' END;

	v_owner := idempotency.portable_owner(caller,
		CASE WHEN portable_idempotent_begin.for_call
			 THEN 'idempotency.idempotent_call(pg_catalog.text, pg_catalog.regprocedure, pg_catalog.jsonb, pg_catalog.text, pg_catalog.interval, pg_catalog.interval)'::pg_catalog.regprocedure
			 ELSE 'idempotency.idempotent_begin(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb, pg_catalog.interval, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool, pg_catalog.interval, pg_catalog.bool, pg_catalog.bool)'::pg_catalog.regprocedure END);
	v_now := pg_catalog.clock_timestamp();
	v_expires := idempotency.portable_after(v_now, portable_idempotent_begin.ttl, 'ttl');
	IF portable_idempotent_begin.lease IS NULL THEN
		v_lease := LEAST(v_expires, v_now OPERATOR(pg_catalog.+) pg_catalog.interval '5 minutes');
	ELSE
		-- a lease longer than ttl ends with the record
		v_lease := LEAST(idempotency.portable_after(v_now, portable_idempotent_begin.lease, 'lease'), v_expires);
	END IF;

	-- a lock on the table is waited for as long as max_wait allows, with
	-- wait => false too (computed once: it reads two settings)
	IF v_timeout OPERATOR(pg_catalog.>) 0 THEN
		v_table_timeout := CASE WHEN portable_idempotent_begin.wait THEN v_timeout
								ELSE idempotency.portable_max_wait_ms(portable_idempotent_begin.max_wait) END;
	END IF;

	-- the token first: a token row locked by a concurrent begin of the same
	-- key is a duplicate in progress like any other
	IF portable_idempotent_begin.require_token THEN
		IF v_timeout OPERATOR(pg_catalog.>) 0 THEN
			BEGIN
				PERFORM pg_catalog.set_config('lock_timeout', v_timeout::pg_catalog.text, true);
				PERFORM idempotency.portable_require_token(v_owner, v_scope, v_key, v_now);
			EXCEPTION WHEN lock_not_available THEN
				v_timed_out := true;
			END;
			PERFORM pg_catalog.set_config('lock_timeout', v_caller_timeout, true);
		ELSE
			PERFORM idempotency.portable_require_token(v_owner, v_scope, v_key, v_now);
		END IF;
	END IF;

	-- this very transaction holds a claim of the key: in_progress (one
	-- without a transaction id has written nothing, so has no claim)
	IF NOT v_read_only AND NOT v_timed_out AND pg_catalog.pg_current_xact_id_if_assigned() IS NOT NULL THEN
		-- (the registry is read only once the claim is known to be ours: this
		-- transaction holds its lock then; a replay gets no transaction id)
		IF EXISTS (SELECT FROM idempotency.portable_claims AS c
					WHERE c.key OPERATOR(pg_catalog.=) v_key AND c.scope OPERATOR(pg_catalog.=) v_scope
					  AND c.owner OPERATOR(pg_catalog.=) v_owner
					  AND c.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id_if_assigned()) THEN
			SELECT r.* INTO rec FROM idempotency.registry AS r
			 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
			   AND r.owner OPERATOR(pg_catalog.=) v_owner;
			PERFORM idempotency.portable_check_request(v_key, v_scope, v_fingerprint, rec.fingerprint,
													   portable_idempotent_begin.request IS NULL);
			outcome := 'in_progress';
			v_answered := true;
		END IF;
	END IF;

	-- read first, in no subtransaction: a finished record replays, writing
	-- nothing and waiting for no row (a claim in progress may be finishing:
	-- the write below waits for it); the read waits for a lock on the table
	-- only as long as max_wait lets it, then fails with PostgreSQL's 55P03
	IF NOT v_answered AND NOT v_timed_out THEN
		IF v_table_timeout OPERATOR(pg_catalog.>) 0 THEN
			PERFORM pg_catalog.set_config('lock_timeout', v_table_timeout::pg_catalog.text, true);
		END IF;
		SELECT * INTO rec FROM idempotency.registry AS r
		 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
		   AND r.owner OPERATOR(pg_catalog.=) v_owner;
		v_found := FOUND;
		IF v_table_timeout OPERATOR(pg_catalog.>) 0 THEN
			PERFORM pg_catalog.set_config('lock_timeout', v_caller_timeout, true);
		END IF;
		v_now := pg_catalog.clock_timestamp();
		IF v_found AND rec.expires_at OPERATOR(pg_catalog.>) v_now AND rec.status OPERATOR(pg_catalog.<>) 'abandoned' THEN
			PERFORM idempotency.portable_check_request(v_key, v_scope, v_fingerprint, rec.fingerprint,
													   portable_idempotent_begin.request IS NULL);
			IF rec.status OPERATOR(pg_catalog.<>) 'processing' THEN
				outcome := 'replay';
				rec.lease_until := NULL;
				v_answered := true;
			END IF;
		END IF;
	END IF;

	FOR tries IN 1 .. 10 LOOP
		EXIT WHEN v_answered OR v_timed_out;
		BEGIN
			IF v_timeout OPERATOR(pg_catalog.>) 0 THEN
				PERFORM pg_catalog.set_config('lock_timeout', v_timeout::pg_catalog.text, true);
			END IF;
			v_now := pg_catalog.clock_timestamp();
			v_fence := idempotency.portable_fence();
			n := 0;
			IF NOT v_read_only THEN
				INSERT INTO idempotency.registry AS r (owner, scope, key, status, attempt, fingerprint,
													   created_at, updated_at, lease_until, expires_at)
				VALUES (v_owner, v_scope, v_key, 'processing', v_fence, v_fingerprint, v_now, v_now, v_lease, v_expires)
				ON CONFLICT ON CONSTRAINT registry_pkey DO NOTHING;
				GET DIAGNOSTICS n = ROW_COUNT;
			END IF;
			IF n OPERATOR(pg_catalog.=) 1 THEN
				-- nobody has this key, the claim is ours
				outcome := 'execute';
				status := 'processing';
				attempt := v_fence;
				expires_at := v_expires;
				lease_until := v_lease;
				v_answered := true;
			ELSE
				SELECT * INTO rec FROM idempotency.registry AS r
				 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
				   AND r.owner OPERATOR(pg_catalog.=) v_owner;
				IF NOT FOUND AND v_read_only THEN
					-- a read-only transaction claims nothing: the INSERT's 25006
					INSERT INTO idempotency.registry AS r (owner, scope, key, status, attempt, fingerprint,
														   created_at, updated_at, lease_until, expires_at)
					VALUES (v_owner, v_scope, v_key, 'processing', v_fence, v_fingerprint, v_now, v_now, v_lease, v_expires);
				ELSIF NOT FOUND THEN
					NULL;		-- deleted since the INSERT conflicted: again
				ELSIF rec.expires_at OPERATOR(pg_catalog.<=) v_now OR rec.status OPERATOR(pg_catalog.=) 'abandoned' THEN
					-- an expired or abandoned record counts as absent: claim it afresh
					UPDATE idempotency.registry AS r
					   SET status = 'processing', attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, v_fence),
						   fingerprint = v_fingerprint, response = NULL, status_code = NULL, body = NULL, headers = NULL,
						   created_at = v_now, updated_at = v_now, lease_until = v_lease, expires_at = v_expires,
						   recovery_point = NULL, recovery_state = NULL
					 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
					   AND r.owner OPERATOR(pg_catalog.=) v_owner
					   AND NOT (r.expires_at OPERATOR(pg_catalog.>) v_now AND r.status OPERATOR(pg_catalog.<>) 'abandoned')
					   AND r.attempt OPERATOR(pg_catalog.=) rec.attempt AND r.status OPERATOR(pg_catalog.=) rec.status
					RETURNING r.attempt INTO attempt;
					IF FOUND THEN
						outcome := 'execute';
						status := 'processing';
						expires_at := v_expires;
						lease_until := v_lease;
						previous_attempt := rec.attempt;
						previous_end := CASE rec.status WHEN 'processing' THEN 'lease_expired'
										WHEN 'abandoned' THEN 'abandoned' ELSE 'expired' END;
						v_answered := true;
					END IF;
				ELSE
					PERFORM idempotency.portable_check_request(v_key, v_scope, v_fingerprint, rec.fingerprint,
															   portable_idempotent_begin.request IS NULL);
					IF rec.status OPERATOR(pg_catalog.<>) 'processing' THEN
						outcome := 'replay';
						rec.lease_until := NULL;
						v_answered := true;
					ELSIF rec.lease_until OPERATOR(pg_catalog.>) v_now THEN
						outcome := 'in_progress';
						v_answered := true;
					ELSE
						-- the lease ran out: the work may have partly happened; take it over
						UPDATE idempotency.registry AS r
						   SET attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, v_fence),
							   updated_at = v_now, lease_until = v_lease
						 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
						   AND r.owner OPERATOR(pg_catalog.=) v_owner
						   AND r.status OPERATOR(pg_catalog.=) 'processing' AND r.lease_until OPERATOR(pg_catalog.<=) v_now
						   AND r.expires_at OPERATOR(pg_catalog.>) v_now
						   AND r.attempt OPERATOR(pg_catalog.=) rec.attempt
						RETURNING r.attempt, r.expires_at, r.recovery_point, r.recovery_state
							 INTO attempt, expires_at, recovery_point, recovery_state;
						IF FOUND THEN
							outcome := 'execute';
							status := 'processing';
							lease_until := v_lease;
							previous_attempt := rec.attempt;
							previous_end := 'lease_expired';
							v_answered := true;
						END IF;
					END IF;
				END IF;
			END IF;
			IF outcome OPERATOR(pg_catalog.=) 'execute' THEN
				INSERT INTO idempotency.portable_claims (owner, scope, key, attempt, kind)
				VALUES (v_owner, v_scope, v_key, attempt, v_kind);
			END IF;
		EXCEPTION WHEN lock_not_available THEN
			IF v_timeout OPERATOR(pg_catalog.=) 0 THEN
				RAISE;
			END IF;
			-- a lock on the table says nothing of the key: 55P03, not
			-- in_progress, which would say that a request holds it
			BEGIN
				LOCK TABLE idempotency.registry IN ROW EXCLUSIVE MODE NOWAIT;
			EXCEPTION WHEN lock_not_available THEN
				RAISE EXCEPTION 'could not claim idempotency key "%": table "idempotency.registry" is locked', idempotency.portable_display(v_key)
					USING ERRCODE = 'lock_not_available',
						  DETAIL = pg_catalog.format('Another transaction holds a lock on the registry table (ALTER EXTENSION idempotency UPDATE among others); the call waited %s ms for it.', v_timeout),
						  HINT = 'Retry the request.';
			END;
			v_timed_out := true;
		END;
		PERFORM pg_catalog.set_config('lock_timeout', v_caller_timeout, true);
	END LOOP;

	IF v_timed_out THEN
		-- another transaction holds the record: its lease cannot be read
		-- until it commits, so the retry time is estimated
		outcome := 'in_progress';
		status := 'processing';
		response := NULL;
		attempt := NULL;
		expires_at := v_expires;
		lease_until := LEAST(v_lease, v_now OPERATOR(pg_catalog.+) pg_catalog.interval '1 second');
		status_code := NULL;
		body := NULL;
		headers := NULL;
		previous_attempt := NULL;
		previous_end := NULL;
		recovery_point := NULL;
		recovery_state := NULL;
	ELSIF NOT v_answered THEN
		RAISE EXCEPTION 'could not claim idempotency key "%" because of concurrent changes', idempotency.portable_display(v_key)
			USING ERRCODE = '40001', HINT = 'Retry the request.';
	ELSIF outcome OPERATOR(pg_catalog.<>) 'execute' THEN
		status := rec.status;
		response := rec.response;
		attempt := rec.attempt;
		expires_at := rec.expires_at;
		lease_until := rec.lease_until;
		status_code := rec.status_code;
		body := rec.body;
		headers := rec.headers;
		recovery_point := rec.recovery_point;
		recovery_state := rec.recovery_state;
	END IF;
	IF outcome OPERATOR(pg_catalog.=) 'in_progress' THEN
		retry_after := CASE WHEN lease_until IS NULL THEN 1
							ELSE GREATEST(1, LEAST(pg_catalog.ceil(pg_catalog.date_part('epoch', lease_until OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp())), 2147483647))::pg_catalog.int4 END;
	END IF;
END
$$;

COMMENT ON FUNCTION idempotency.portable_idempotent_begin IS
'idempotent_begin() for a caller, checked against the session (and idempotent_call()''s claim)';

/*
 * How long a begin with wait => true waits for another transaction's hold,
 * in ms, as begin_lock_timeout: max_wait, or the setting
 * idempotency.max_wait (default 5s; -1: no bound of its own), bounded by a
 * lock_timeout the caller set; 0 for as long as it takes.
 */
CREATE FUNCTION idempotency.portable_max_wait_ms(max_wait pg_catalog.interval)
RETURNS pg_catalog.int8
LANGUAGE plpgsql STABLE PARALLEL SAFE
AS $$
DECLARE
	ms pg_catalog.int8;
	lts pg_catalog.text := pg_catalog.current_setting('lock_timeout');
	lt pg_catalog.int8 := CASE WHEN lts OPERATOR(pg_catalog.=) '0' THEN 0
						  ELSE (pg_catalog.date_part('epoch', lts::pg_catalog.interval) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8 END;
BEGIN
	IF max_wait IS NOT NULL THEN
		ms := pg_catalog.trunc(pg_catalog.date_part('epoch', max_wait) OPERATOR(pg_catalog.*) 1000)::pg_catalog.int8;
		IF ms OPERATOR(pg_catalog.<) 0 THEN
			RAISE EXCEPTION 'max_wait must not be negative' USING ERRCODE = 'invalid_parameter_value';
		END IF;
	ELSE
		ms := idempotency.portable_setting('idempotency.max_wait', 'ms', 5000, -1, 2147483647);
		IF ms OPERATOR(pg_catalog.<) 0 THEN
			RETURN lt;
		END IF;
	END IF;
	IF ms OPERATOR(pg_catalog.=) 0 THEN
		RETURN 1;
	END IF;
	IF lt OPERATOR(pg_catalog.>) 0 AND lt OPERATOR(pg_catalog.<) ms THEN
		RETURN lt;
	END IF;
	RETURN LEAST(ms, 2147483647);
END
$$;

COMMENT ON FUNCTION idempotency.portable_max_wait_ms(pg_catalog.interval) IS
'how long a begin waits for another transaction''s hold, in ms, as idempotent_begin with wait => true does';

/* begin_check_request: reusing a key for a different request is refused */
CREATE FUNCTION idempotency.portable_check_request(v_key pg_catalog.text, v_scope pg_catalog.text,
												   fingerprint pg_catalog.bytea, stored pg_catalog.bytea,
												   no_request pg_catalog.bool)
RETURNS void
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
	IF stored IS NULL OR (NOT no_request AND stored OPERATOR(pg_catalog.=) fingerprint) THEN
		RETURN;
	END IF;
	IF no_request THEN
		RAISE EXCEPTION 'idempotency key "%" in scope "%" was already used for a different request', idempotency.portable_display(v_key), v_scope
			USING ERRCODE = 'IK001',
				  DETAIL = 'The key''s record was stored with a request, and this call passes none.',
				  HINT = 'Pass the same request, or read the record with lookup().';
	END IF;
	RAISE EXCEPTION 'idempotency key "%" in scope "%" was already used for a different request', idempotency.portable_display(v_key), v_scope
		USING ERRCODE = 'IK001', HINT = 'Use a new key for a new request.';
END
$$;

COMMENT ON FUNCTION idempotency.portable_check_request(pg_catalog.text, pg_catalog.text, pg_catalog.bytea, pg_catalog.bytea, pg_catalog.bool) IS
'refuses a key reused for a different request';

/* tokens.c's TokenRequire: the key must be a token issued to the owner */
CREATE FUNCTION idempotency.portable_require_token(v_owner pg_catalog.text, v_scope pg_catalog.text,
												   v_key pg_catalog.text, v_now pg_catalog.timestamptz)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	used pg_catalog.bool;
BEGIN
	UPDATE idempotency.tokens AS t SET consumed_at = v_now
	 WHERE t.token OPERATOR(pg_catalog.=) v_key AND t.scope OPERATOR(pg_catalog.=) v_scope
	   AND t.owner OPERATOR(pg_catalog.=) v_owner
	   AND t.consumed_at IS NULL AND t.expires_at OPERATOR(pg_catalog.>) v_now;
	IF FOUND THEN
		RETURN;
	END IF;
	SELECT t.consumed_at IS NOT NULL INTO used FROM idempotency.tokens AS t
	 WHERE t.token OPERATOR(pg_catalog.=) v_key AND t.scope OPERATOR(pg_catalog.=) v_scope
	   AND t.owner OPERATOR(pg_catalog.=) v_owner;
	IF used THEN
		RETURN;					-- used: let the registry replay it
	END IF;
	RAISE EXCEPTION 'idempotency key "%" is not a valid token in scope "%"', idempotency.portable_display(v_key), v_scope
		USING ERRCODE = 'IK005',
			  DETAIL = 'It was never issued to this role, or it expired unused.',
			  HINT = 'Ask for a new token with idempotency.issue_token().';
END
$$;

COMMENT ON FUNCTION idempotency.portable_require_token(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz) IS
'consumes the token a begin with require_token => true names, or refuses it';

REVOKE ALL ON FUNCTION idempotency.portable_require_token(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.timestamptz) FROM PUBLIC;

CREATE FUNCTION idempotency.idempotent_begin(key pg_catalog.text,
											 scope pg_catalog.text DEFAULT '',
											 request pg_catalog.jsonb DEFAULT NULL,
											 ttl pg_catalog.interval DEFAULT '24 hours',
											 lease pg_catalog.interval DEFAULT NULL,
											 wait pg_catalog.bool DEFAULT true,
											 require_token pg_catalog.bool DEFAULT false,
											 max_wait pg_catalog.interval DEFAULT NULL,
											 defer_claim pg_catalog.bool DEFAULT false,
											 external pg_catalog.bool DEFAULT false,
											 OUT outcome pg_catalog.text,
											 OUT status pg_catalog.text,
											 OUT response pg_catalog.jsonb,
											 OUT attempt pg_catalog.int4,
											 OUT expires_at pg_catalog.timestamptz,
											 OUT lease_until pg_catalog.timestamptz,
											 OUT status_code pg_catalog.int4,
											 OUT body pg_catalog.bytea,
											 OUT headers pg_catalog.jsonb,
											 OUT previous_attempt pg_catalog.int4,
											 OUT previous_end pg_catalog.text,
											 OUT retry_after pg_catalog.int4,
											 OUT recovery_point pg_catalog.text,
											 OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
	-- PL/pgSQL, not SQL: a SQL function that returns a record is planned
	-- again in every transaction that calls it (no search_path of its own
	-- either: it runs as its caller, and names only qualified objects)
	SELECT * INTO outcome, status, response, attempt, expires_at, lease_until, status_code, body, headers,
				  previous_attempt, previous_end, retry_after, recovery_point, recovery_state
	  FROM idempotency.portable_idempotent_begin(CURRENT_USER, false, key, scope, request, ttl, lease, wait,
												 require_token, max_wait, defer_claim, external);
END
$$;

COMMENT ON FUNCTION idempotency.idempotent_begin IS
'claim an idempotency key: outcome execute, replay or in_progress';

REVOKE ALL ON FUNCTION idempotency.idempotent_begin FROM PUBLIC;
