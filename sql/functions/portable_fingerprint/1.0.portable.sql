/*
 * fingerprint.c's fingerprint, in SQL: a version byte (2), then the SHA-256
 * of the request's canonical form, byte for byte the C edition's, so that
 * records move between the editions and keep matching their requests.  The
 * canonical form tags every token: {} objects with k"key" before each
 * value, [] arrays, ( for a top-level scalar, s"string" (JSON-escaped), n
 * for a number in numeric_normalize's form (what trim_scale gives), t, f,
 * z.  keyvalue() gives an object's members in jsonb's own order, which is the
 * order the C iterator walks.
 */
CREATE FUNCTION idempotency.portable_canonical(value pg_catalog.jsonb, top pg_catalog.bool)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
	kind pg_catalog.text := pg_catalog.jsonb_typeof(value);
	members pg_catalog.jsonb;
	result pg_catalog.text;
BEGIN
	-- expressions only, no statement: a statement (jsonb_each and an
	-- aggregate) costs a request twice as much, rebuilt in each transaction
	IF kind OPERATOR(pg_catalog.=) 'object' THEN
		members := pg_catalog.jsonb_path_query_array(value, '$.keyvalue()');
		result := '{';
		FOR i IN 0 .. pg_catalog.jsonb_array_length(members) OPERATOR(pg_catalog.-) 1 LOOP
			result := result OPERATOR(pg_catalog.||) 'k'
					  OPERATOR(pg_catalog.||) pg_catalog.to_json(members OPERATOR(pg_catalog.->) i OPERATOR(pg_catalog.->>) 'key')::pg_catalog.text
					  OPERATOR(pg_catalog.||) idempotency.portable_canonical(members OPERATOR(pg_catalog.->) i OPERATOR(pg_catalog.->) 'value', false);
		END LOOP;
		RETURN result OPERATOR(pg_catalog.||) '}';
	ELSIF kind OPERATOR(pg_catalog.=) 'array' THEN
		result := '[';
		FOR i IN 0 .. pg_catalog.jsonb_array_length(value) OPERATOR(pg_catalog.-) 1 LOOP
			result := result OPERATOR(pg_catalog.||) idempotency.portable_canonical(value OPERATOR(pg_catalog.->) i, false);
		END LOOP;
		RETURN result OPERATOR(pg_catalog.||) ']';
	ELSIF kind OPERATOR(pg_catalog.=) 'string' THEN
		result := 's' OPERATOR(pg_catalog.||) pg_catalog.to_json(value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.text;
	ELSIF kind OPERATOR(pg_catalog.=) 'number' THEN
		result := 'n' OPERATOR(pg_catalog.||) pg_catalog.trim_scale((value OPERATOR(pg_catalog.#>>) '{}'::pg_catalog.text[])::pg_catalog.numeric)::pg_catalog.text;
	ELSIF kind OPERATOR(pg_catalog.=) 'boolean' THEN
		result := CASE WHEN value OPERATOR(pg_catalog.=) 'true'::pg_catalog.jsonb THEN 't' ELSE 'f' END;
	ELSE
		result := 'z';
	END IF;
	IF top THEN
		RETURN '(' OPERATOR(pg_catalog.||) result OPERATOR(pg_catalog.||) ']';
	END IF;
	RETURN result;
END
$$;

COMMENT ON FUNCTION idempotency.portable_canonical(pg_catalog.jsonb, pg_catalog.bool) IS
'a request''s canonical form, as the C edition hashes it';

/*
 * PL/pgSQL rather than SQL, here and in the other helpers a claim calls:
 * a PL/pgSQL function keeps its plans for the session, where a SQL one
 * called from PL/pgSQL is planned again in every transaction.
 */
CREATE FUNCTION idempotency.portable_fingerprint(request pg_catalog.jsonb)
RETURNS pg_catalog.bytea
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
	RETURN '\x02'::pg_catalog.bytea OPERATOR(pg_catalog.||)
		   pg_catalog.sha256(pg_catalog.convert_to(idempotency.portable_canonical(request, true),
												   pg_catalog.current_setting('server_encoding')));
END
$$;

COMMENT ON FUNCTION idempotency.portable_fingerprint(pg_catalog.jsonb) IS
'a request''s fingerprint, byte for byte the C edition''s';
