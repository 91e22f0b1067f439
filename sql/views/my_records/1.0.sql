/*
 * A role's own records.  owner_name() is evaluated for the caller, and the
 * security barrier keeps a caller's leaky function from seeing other rows.
 */
CREATE VIEW idempotency.my_records WITH (security_barrier) AS
	SELECT r.key, r.scope, r.status, r.attempt, r.created_at, r.updated_at,
		   r.lease_until, r.expires_at,
		   (r.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now()
			OR r.status OPERATOR(pg_catalog.=) 'abandoned') AS expired,
		   r.response, r.status_code, r.body, r.headers, r.fingerprint
	  FROM idempotency.registry AS r
	 WHERE r.owner OPERATOR(pg_catalog.=) idempotency.owner_name();

REVOKE ALL ON TABLE idempotency.my_records FROM PUBLIC;

COMMENT ON VIEW idempotency.my_records IS 'the calling role''s idempotency records';
