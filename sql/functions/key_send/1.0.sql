CREATE FUNCTION idempotency.key_send(idempotency.key)
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME' LANGUAGE C STABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.key_send(idempotency.key) IS 'binary output of idempotency.key';
