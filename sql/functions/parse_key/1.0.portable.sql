/* keyfuncs.c's parse_key, in PL/pgSQL: no row for an opaque key */
CREATE FUNCTION idempotency.parse_key(key pg_catalog.text,
									  OUT prefix pg_catalog.text,
									  OUT business_id pg_catalog.text,
									  OUT operation pg_catalog.text,
									  OUT version pg_catalog.text,
									  OUT checksum pg_catalog.text,
									  OUT checksum_ok pg_catalog.bool)
RETURNS SETOF pg_catalog.record
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE ROWS 1
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	parts pg_catalog.text[] := pg_catalog.string_to_array(idempotency.key(parse_key.key), ':');
BEGIN
	IF pg_catalog.array_length(parts, 1) OPERATOR(pg_catalog.<>) 5 OR '' OPERATOR(pg_catalog.=) ANY (parts)
	   OR parts[5] OPERATOR(pg_catalog.!~) '^[0-9A-Fa-f]{8}$' THEN
		RETURN;					-- opaque
	END IF;
	prefix := parts[1];
	business_id := parts[2];
	operation := parts[3];
	version := parts[4];
	checksum := parts[5];
	checksum_ok := pg_catalog.left(pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to(pg_catalog.array_to_string(parts[1:4], ':'),
																							 pg_catalog.current_setting('server_encoding'))), 'hex'), 8)
		OPERATOR(pg_catalog.=) parts[5];
	RETURN NEXT;
END
$$;

COMMENT ON FUNCTION idempotency.parse_key(pg_catalog.text) IS
'split a structured key into its parts and check its checksum; no row for an opaque key';
