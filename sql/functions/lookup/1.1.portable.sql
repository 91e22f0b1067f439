/*
 * lookup.c's lookup, in PL/pgSQL: the caller's live record (neither expired
 * nor abandoned), read without claiming anything; request_matches when a
 * request is given and the record stored one.  The body is SECURITY
 * DEFINER, to read the registry, filtered on the caller's owner as every C
 * statement is; lookup() passes it the caller (portable_owner).
 */
CREATE FUNCTION idempotency.portable_lookup(caller pg_catalog.name,
											key pg_catalog.text,
											scope pg_catalog.text,
											request pg_catalog.jsonb,
								   OUT found pg_catalog.bool,
								   OUT status pg_catalog.text,
								   OUT response pg_catalog.jsonb,
								   OUT status_code pg_catalog.int4,
								   OUT body pg_catalog.bytea,
								   OUT headers pg_catalog.jsonb,
								   OUT attempt pg_catalog.int4,
								   OUT expires_at pg_catalog.timestamptz,
								   OUT lease_until pg_catalog.timestamptz,
								   OUT request_matches pg_catalog.bool,
								   OUT recovery_point pg_catalog.text,
								   OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
LANGUAGE plpgsql STABLE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	k pg_catalog.text;
	fingerprint pg_catalog.bytea;
	n pg_catalog.int8;
BEGIN
	IF portable_lookup.key IS NULL THEN
		RAISE EXCEPTION 'idempotency key must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	k := idempotency.key(portable_lookup.key);
	PERFORM idempotency.portable_scope(portable_lookup.scope);
	-- (the result column found is shadowed by PL/pgSQL's FOUND: it is $5)
	SELECT r.status, r.response, r.status_code, r.body, r.headers, r.attempt, r.expires_at,
		   r.lease_until, r.fingerprint, r.recovery_point, r.recovery_state
	  INTO status, response, status_code, body, headers, attempt, expires_at,
		   lease_until, fingerprint, recovery_point, recovery_state
	  FROM idempotency.registry AS r
	 WHERE r.key OPERATOR(pg_catalog.=) k
	   AND r.scope OPERATOR(pg_catalog.=) portable_lookup.scope
	   AND r.owner OPERATOR(pg_catalog.=) idempotency.portable_owner(caller, 'idempotency.lookup(pg_catalog.text, pg_catalog.text, pg_catalog.jsonb)')
	   AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
	   AND r.status OPERATOR(pg_catalog.<>) 'abandoned';
	GET DIAGNOSTICS n = ROW_COUNT;
	$5 := n OPERATOR(pg_catalog.>) 0;
	IF n OPERATOR(pg_catalog.=) 0 THEN
		RETURN;
	END IF;
	IF portable_lookup.request IS NOT NULL AND fingerprint IS NOT NULL THEN
		request_matches := fingerprint OPERATOR(pg_catalog.=) idempotency.portable_fingerprint(portable_lookup.request);
	END IF;
END
$$;

COMMENT ON FUNCTION idempotency.portable_lookup IS
'lookup() for a caller, checked against the session';

CREATE FUNCTION idempotency.lookup(key pg_catalog.text,
								   scope pg_catalog.text DEFAULT '',
								   request pg_catalog.jsonb DEFAULT NULL,
								   OUT found pg_catalog.bool,
								   OUT status pg_catalog.text,
								   OUT response pg_catalog.jsonb,
								   OUT status_code pg_catalog.int4,
								   OUT body pg_catalog.bytea,
								   OUT headers pg_catalog.jsonb,
								   OUT attempt pg_catalog.int4,
								   OUT expires_at pg_catalog.timestamptz,
								   OUT lease_until pg_catalog.timestamptz,
								   OUT request_matches pg_catalog.bool,
								   OUT recovery_point pg_catalog.text,
								   OUT recovery_state pg_catalog.jsonb)
RETURNS pg_catalog.record
LANGUAGE sql STABLE PARALLEL UNSAFE
BEGIN ATOMIC
	SELECT * FROM idempotency.portable_lookup(CURRENT_USER, key, scope, request);
END;

COMMENT ON FUNCTION idempotency.lookup IS
'read the caller''s live record of a key without claiming it';

REVOKE ALL ON FUNCTION idempotency.lookup FROM PUBLIC;
