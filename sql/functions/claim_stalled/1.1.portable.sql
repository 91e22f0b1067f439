/*
 * recovery.c's claim_stalled, in PL/pgSQL: takes over up to batch_size of
 * the caller's claims whose lease ran out, as a begin's take-over does,
 * SKIP LOCKED past those another completer or a begin holds, and past the
 * claims this transaction must end itself (any but external ones).  Each
 * becomes this transaction's external claim.  The body is SECURITY
 * DEFINER; claim_stalled() passes it its caller.
 */
CREATE FUNCTION idempotency.portable_claim_stalled(caller pg_catalog.name,
												   in_scope pg_catalog.text,
												   batch_size pg_catalog.int4,
												   lease pg_catalog.interval,
												   OUT key idempotency.key,
												   OUT scope pg_catalog.text,
												   OUT attempt pg_catalog.int4,
												   OUT previous_attempt pg_catalog.int4,
												   OUT lease_until pg_catalog.timestamptz,
												   OUT expires_at pg_catalog.timestamptz,
												   OUT created_at pg_catalog.timestamptz,
												   OUT recovery_point pg_catalog.text,
												   OUT recovery_state pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_scope pg_catalog.text := in_scope;
	v_owner pg_catalog.text;
	v_now pg_catalog.timestamptz;
	v_lease pg_catalog.timestamptz;
	v_fence pg_catalog.int4;
BEGIN
	IF v_scope IS NOT NULL THEN
		v_scope := idempotency.portable_scope(v_scope);
	END IF;
	IF batch_size IS NULL THEN
		RAISE EXCEPTION 'batch_size must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	IF batch_size NOT BETWEEN 1 AND 10000 THEN
		RAISE EXCEPTION 'batch_size must be between 1 and %', 10000
			USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('It is %s.', batch_size);
	END IF;
	v_owner := idempotency.portable_owner(caller, 'idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval)');
	v_now := pg_catalog.clock_timestamp();
	IF lease IS NULL THEN
		v_lease := v_now OPERATOR(pg_catalog.+) pg_catalog.interval '5 minutes';
	ELSE
		v_lease := idempotency.portable_after(v_now, lease, 'lease');
	END IF;
	v_fence := idempotency.portable_fence();
	FOR key, scope, attempt, previous_attempt, lease_until, expires_at, created_at, recovery_point, recovery_state IN
		UPDATE idempotency.registry AS r
		   SET attempt = GREATEST(r.attempt OPERATOR(pg_catalog.+) 1, v_fence),
			   updated_at = v_now, lease_until = LEAST(v_lease, r.expires_at)
		  FROM (SELECT s.key, s.scope, s.owner, s.attempt FROM idempotency.registry AS s
				 WHERE s.owner OPERATOR(pg_catalog.=) v_owner
				   AND (v_scope IS NULL OR s.scope OPERATOR(pg_catalog.=) v_scope)
				   AND s.status OPERATOR(pg_catalog.=) 'processing'
				   AND s.lease_until OPERATOR(pg_catalog.<=) v_now AND s.expires_at OPERATOR(pg_catalog.>) v_now
				   AND NOT EXISTS (SELECT FROM idempotency.portable_claims AS c
									WHERE c.key OPERATOR(pg_catalog.=) s.key::pg_catalog.text
									  AND c.scope OPERATOR(pg_catalog.=) s.scope AND c.owner OPERATOR(pg_catalog.=) s.owner
									  AND c.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id()
									  AND c.kind OPERATOR(pg_catalog.<>) 'external')
				 LIMIT batch_size FOR UPDATE SKIP LOCKED) AS s
		 WHERE r.key OPERATOR(pg_catalog.=) s.key AND r.scope OPERATOR(pg_catalog.=) s.scope
		   AND r.owner OPERATOR(pg_catalog.=) s.owner
		RETURNING r.key, r.scope, r.attempt, s.attempt, r.lease_until, r.expires_at, r.created_at,
				  r.recovery_point, r.recovery_state
	LOOP
		-- this transaction's own external claim is superseded by the new attempt
		DELETE FROM idempotency.portable_claims AS c
		 WHERE c.key OPERATOR(pg_catalog.=) portable_claim_stalled.key::pg_catalog.text
		   AND c.scope OPERATOR(pg_catalog.=) portable_claim_stalled.scope
		   AND c.owner OPERATOR(pg_catalog.=) v_owner AND c.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id();
		INSERT INTO idempotency.portable_claims AS c (owner, scope, key, attempt, kind)
		VALUES (v_owner, portable_claim_stalled.scope, portable_claim_stalled.key, portable_claim_stalled.attempt, 'external');
		RETURN NEXT;
	END LOOP;
END
$$;

COMMENT ON FUNCTION idempotency.portable_claim_stalled(pg_catalog.name, pg_catalog.text, pg_catalog.int4, pg_catalog.interval) IS
'claim_stalled() for a caller, checked against the session';

CREATE FUNCTION idempotency.claim_stalled(scope pg_catalog.text DEFAULT NULL,
										  batch_size pg_catalog.int4 DEFAULT 10,
										  lease pg_catalog.interval DEFAULT NULL,
										  OUT key idempotency.key,
										  OUT scope pg_catalog.text,
										  OUT attempt pg_catalog.int4,
										  OUT previous_attempt pg_catalog.int4,
										  OUT lease_until pg_catalog.timestamptz,
										  OUT expires_at pg_catalog.timestamptz,
										  OUT created_at pg_catalog.timestamptz,
										  OUT recovery_point pg_catalog.text,
										  OUT recovery_state pg_catalog.jsonb)
RETURNS SETOF pg_catalog.record
LANGUAGE sql VOLATILE PARALLEL UNSAFE ROWS 10
BEGIN ATOMIC
	SELECT * FROM idempotency.portable_claim_stalled(CURRENT_USER, claim_stalled.scope, batch_size, lease);
END;

COMMENT ON FUNCTION idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval) IS
'take over a batch of the caller''s stalled claims, each with a new attempt and its recovery point, for a completer';

REVOKE ALL ON FUNCTION idempotency.claim_stalled(pg_catalog.text, pg_catalog.int4, pg_catalog.interval) FROM PUBLIC;
