CREATE FUNCTION idempotency.key_out(idempotency.key)
RETURNS pg_catalog.cstring
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.key_out(idempotency.key) IS 'text output of idempotency.key';
