CREATE FUNCTION idempotency.text_key_cmp(pg_catalog.text, idempotency.key)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_key_cmp(pg_catalog.text, idempotency.key) IS
'bytewise comparison of text with a key: -1, 0 or 1';
