CREATE OR REPLACE VIEW idempotency.my_tokens WITH (security_barrier) AS
	SELECT t.token, t.scope COLLATE pg_catalog."C" AS scope, t.issued_at, t.expires_at,
		   t.consumed_at, t.state
	  FROM idempotency.citus_my_tokens() AS t;
