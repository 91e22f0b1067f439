CREATE FUNCTION idempotency.text_bytewise_cmp(pg_catalog.text, pg_catalog.text)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text_bytewise_cmp(pg_catalog.text, pg_catalog.text) IS
'bytewise comparison of two text values, as keys compare: -1, 0 or 1';
