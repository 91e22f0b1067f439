CREATE FUNCTION idempotency.key_hash_text_extended(pg_catalog.text, pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash_text_extended(pg_catalog.text, pg_catalog.int8) IS
'seeded 64-bit hash of a text compared with a key';
