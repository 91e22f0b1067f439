CREATE OR REPLACE VIEW idempotency.my_records WITH (security_barrier) AS
	SELECT r.key, r.scope COLLATE pg_catalog."C" AS scope, r.status, r.attempt,
		   r.created_at, r.updated_at, r.lease_until, r.expires_at, r.expired, r.response,
		   r.status_code, r.body, r.headers, r.fingerprint, r.recovery_point, r.recovery_state
	  FROM idempotency.citus_my_records() AS r;
