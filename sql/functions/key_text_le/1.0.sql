CREATE FUNCTION idempotency.key_text_le(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_le(idempotency.key, pg_catalog.text) IS
'implementation of <= for a key with text';
