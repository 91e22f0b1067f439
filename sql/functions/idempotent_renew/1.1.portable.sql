/*
 * recovery.c's idempotent_renew, in PL/pgSQL: the caller's claim's lease
 * ends lease from now, no later than the record's expiry; fenced as a
 * finish is.  The body is SECURITY DEFINER; idempotent_renew() passes it
 * its caller.
 */
CREATE FUNCTION idempotency.portable_idempotent_renew(caller pg_catalog.name,
													  key pg_catalog.text,
													  lease pg_catalog.interval,
													  scope pg_catalog.text,
													  attempt pg_catalog.int4)
RETURNS pg_catalog.timestamptz
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	v_key pg_catalog.text := idempotency.portable_key_arg(portable_idempotent_renew.key);
	v_scope pg_catalog.text;
	v_owner pg_catalog.text;
	v_lease pg_catalog.timestamptz;
	v_granted pg_catalog.timestamptz;
	v_attempt pg_catalog.int4 := portable_idempotent_renew.attempt;
	mine record;
BEGIN
	IF portable_idempotent_renew.lease IS NULL THEN
		RAISE EXCEPTION 'lease must not be null' USING ERRCODE = 'null_value_not_allowed';
	END IF;
	v_scope := idempotency.portable_scope(portable_idempotent_renew.scope);
	v_owner := idempotency.portable_owner(caller, 'idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4)');
	v_lease := idempotency.portable_after(pg_catalog.clock_timestamp(), portable_idempotent_renew.lease, 'lease');
	mine := idempotency.portable_own_attempt(v_owner, v_scope, v_key, v_attempt, 'renew the lease of');
	v_attempt := COALESCE(mine.attempt, v_attempt);
	IF v_attempt IS NOT NULL THEN
		UPDATE idempotency.registry AS r
		   SET lease_until = LEAST(v_lease, r.expires_at), updated_at = pg_catalog.clock_timestamp()
		 WHERE r.key OPERATOR(pg_catalog.=) v_key AND r.scope OPERATOR(pg_catalog.=) v_scope
		   AND r.owner OPERATOR(pg_catalog.=) v_owner
		   AND r.status OPERATOR(pg_catalog.=) 'processing' AND r.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()
		   AND r.attempt OPERATOR(pg_catalog.=) v_attempt
		RETURNING r.lease_until INTO v_granted;
	END IF;
	IF v_granted IS NULL THEN
		PERFORM idempotency.portable_explain_miss(v_owner, v_scope, v_key, v_attempt, NULL, NULL, NULL, NULL, NULL,
												  'renewing the lease of');
	END IF;
	RETURN v_granted;
END
$$;

COMMENT ON FUNCTION idempotency.portable_idempotent_renew(pg_catalog.name, pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
'idempotent_renew() for a caller, checked against the session';

CREATE FUNCTION idempotency.idempotent_renew(key pg_catalog.text,
											 lease pg_catalog.interval,
											 scope pg_catalog.text DEFAULT '',
											 attempt pg_catalog.int4 DEFAULT NULL)
RETURNS pg_catalog.timestamptz
LANGUAGE sql VOLATILE PARALLEL UNSAFE
RETURN idempotency.portable_idempotent_renew(CURRENT_USER, key, lease, scope, attempt);

COMMENT ON FUNCTION idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) IS
'extend the lease of a running claim so that it is not taken over; returns the new lease_until';

REVOKE ALL ON FUNCTION idempotency.idempotent_renew(pg_catalog.text, pg_catalog.interval, pg_catalog.text, pg_catalog.int4) FROM PUBLIC;
