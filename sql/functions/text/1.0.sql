CREATE FUNCTION idempotency.text(idempotency.key)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'key_to_text' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE LEAKPROOF;

COMMENT ON FUNCTION idempotency.text(idempotency.key) IS 'an idempotency key as text';
