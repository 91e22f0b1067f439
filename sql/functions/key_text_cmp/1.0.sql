CREATE FUNCTION idempotency.key_text_cmp(idempotency.key, pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.key_text_cmp(idempotency.key, pg_catalog.text) IS
'bytewise comparison of a key with text: -1, 0 or 1';
