CREATE FUNCTION idempotency.consume_token(token pg_catalog.text, scope pg_catalog.text DEFAULT '')
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'idempotency_consume_token'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION idempotency.consume_token(pg_catalog.text, pg_catalog.text) IS
'true exactly once for an unexpired token; false for used, expired or unknown tokens alike';

REVOKE ALL ON FUNCTION idempotency.consume_token(pg_catalog.text, pg_catalog.text) FROM PUBLIC;
