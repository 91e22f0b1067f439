CREATE FUNCTION idempotency.key_hash_extended(idempotency.key, pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash_extended(idempotency.key, pg_catalog.int8) IS
'seeded 64-bit hash of a key: hash_any_extended over its bytes';
