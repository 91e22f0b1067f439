CREATE FUNCTION idempotency.key_hash(idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash(idempotency.key) IS
'hash of a key: hash_any over its bytes';
