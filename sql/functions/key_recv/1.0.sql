CREATE FUNCTION idempotency.key_recv(pg_catalog.internal)
RETURNS idempotency.key
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.key_recv(pg_catalog.internal) IS 'binary input of idempotency.key, with the same checks as its text input';
