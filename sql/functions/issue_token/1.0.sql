CREATE FUNCTION idempotency.issue_token(scope pg_catalog.text DEFAULT '',
										ttl pg_catalog.interval DEFAULT '10 minutes')
RETURNS idempotency.key
AS 'MODULE_PATHNAME', 'idempotency_issue_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) IS
'a new one-time token (128 random bits) for the calling role';

REVOKE ALL ON FUNCTION idempotency.issue_token(pg_catalog.text, pg_catalog.interval) FROM PUBLIC;
