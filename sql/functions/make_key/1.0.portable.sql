/* keyfuncs.c's make_key, in PL/pgSQL: the same parts, checks and checksum */
CREATE FUNCTION idempotency.make_key(prefix pg_catalog.text,
									 business_id pg_catalog.text,
									 operation pg_catalog.text,
									 version pg_catalog.text DEFAULT 'v1')
RETURNS idempotency.key
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	parts pg_catalog.text[] := ARRAY[prefix, business_id, operation, version];
	names pg_catalog.text[] := ARRAY['prefix', 'business_id', 'operation', 'version'];
	raw pg_catalog.text;
BEGIN
	FOR i IN 1 .. 4 LOOP
		IF parts[i] OPERATOR(pg_catalog.=) '' THEN
			RAISE EXCEPTION '% of an idempotency key must not be empty', names[i]
				USING ERRCODE = 'invalid_parameter_value';
		END IF;
		IF pg_catalog.strpos(parts[i], ':') OPERATOR(pg_catalog.>) 0 THEN
			RAISE EXCEPTION '% of an idempotency key must not contain ":": "%"', names[i],
							idempotency.portable_display(parts[i])
				USING ERRCODE = 'invalid_parameter_value',
					  HINT = 'The parts of a structured key are separated by ":".';
		END IF;
	END LOOP;
	raw := pg_catalog.array_to_string(parts, ':');
	RETURN idempotency.key(raw OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||)
						   pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(raw, pg_catalog.current_setting('server_encoding'))), 'hex'), 8));
END
$$;

COMMENT ON FUNCTION idempotency.make_key(pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text) IS
'build the structured key prefix:business_id:operation:version:checksum';
