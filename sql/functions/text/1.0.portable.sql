/* the domain is a text already: its value as it is */
CREATE FUNCTION idempotency.text(idempotency.key)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT $1::pg_catalog.text $$;

COMMENT ON FUNCTION idempotency.text(idempotency.key) IS 'an idempotency key as text';
