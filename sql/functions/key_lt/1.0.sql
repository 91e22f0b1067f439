CREATE FUNCTION idempotency.key_lt(idempotency.key, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_lt(idempotency.key, idempotency.key) IS
'implementation of < for a key with a key';
