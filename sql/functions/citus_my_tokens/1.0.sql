CREATE FUNCTION idempotency.citus_my_tokens(OUT token idempotency.key,
											OUT scope pg_catalog.text,
											OUT issued_at pg_catalog.timestamptz,
											OUT expires_at pg_catalog.timestamptz,
											OUT consumed_at pg_catalog.timestamptz,
											OUT state pg_catalog.text)
RETURNS SETOF pg_catalog.record
AS 'MODULE_PATHNAME', 'idempotency_citus_my_tokens'
LANGUAGE C STABLE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.citus_my_tokens() IS
'the calling role''s tokens, read as the tokens table''s owner (my_tokens under Citus)';
