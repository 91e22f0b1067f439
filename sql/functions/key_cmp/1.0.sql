CREATE FUNCTION idempotency.key_cmp(idempotency.key, idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_cmp(idempotency.key, idempotency.key) IS
'bytewise comparison of a key with a key: -1, 0 or 1';
