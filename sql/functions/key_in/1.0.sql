CREATE FUNCTION idempotency.key_in(pg_catalog.cstring)
RETURNS idempotency.key
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

COMMENT ON FUNCTION idempotency.key_in(pg_catalog.cstring) IS 'text input of idempotency.key';
