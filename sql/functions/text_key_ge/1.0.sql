CREATE FUNCTION idempotency.text_key_ge(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_ge(pg_catalog.text, idempotency.key) IS
'implementation of >= for text with a key';
