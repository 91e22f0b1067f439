/* a role's own tokens, and why one was refused */
CREATE VIEW idempotency.my_tokens WITH (security_barrier) AS
	SELECT t.token, t.scope, t.issued_at, t.expires_at, t.consumed_at,
		   CASE WHEN t.consumed_at IS NOT NULL THEN 'used'
				WHEN t.expires_at OPERATOR(pg_catalog.<=) pg_catalog.now() THEN 'expired'
				ELSE 'unused' END AS state
	  FROM idempotency.tokens AS t
	 WHERE t.owner OPERATOR(pg_catalog.=) idempotency.owner_name();

REVOKE ALL ON TABLE idempotency.my_tokens FROM PUBLIC;

COMMENT ON VIEW idempotency.my_tokens IS 'the calling role''s one-time tokens, and whether each is unused, used or expired';
