CREATE FUNCTION idempotency.key_hash_text(pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_hash_text(pg_catalog.text) IS
'hash of a text compared with a key: the hash a key with the same bytes has';
