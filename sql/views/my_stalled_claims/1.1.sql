/*
 * The caller's stalled claims: processing, their lease run out, not
 * expired, and nobody retried them.  The completer takes them over with
 * claim_stalled.
 */
CREATE VIEW idempotency.my_stalled_claims WITH (security_barrier) AS
	SELECT r.key, r.scope, r.attempt, r.created_at, r.updated_at, r.lease_until,
		   r.expires_at, r.recovery_point, r.recovery_state
	  FROM idempotency.my_records AS r
	 WHERE r.status OPERATOR(pg_catalog.=) 'processing'
	   AND r.lease_until OPERATOR(pg_catalog.<) pg_catalog.now()
	   AND NOT r.expired;

COMMENT ON VIEW idempotency.my_stalled_claims IS
'the calling role''s claims whose lease ran out and that nobody took over: what claim_stalled takes';

REVOKE ALL ON TABLE idempotency.my_stalled_claims FROM PUBLIC;
