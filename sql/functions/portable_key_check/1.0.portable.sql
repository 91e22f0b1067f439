/*
 * The key type's rules, in PL/pgSQL (src/key/key.c has them in C; the two
 * give the same answers, test/tap/050_portable.pl compares them): 1 to 255
 * bytes, no control, format, separator or noncharacter code point, no white
 * space at either end.  Every function of the portable edition that takes a
 * key passes it through here.  In a database whose encoding is neither
 * UTF8 nor SQL_ASCII, a character above ASCII is accepted as it is (the C
 * edition knows each single-byte character set's characters).
 */

/*
 * What a code point is to a key: NULL for a printable character, else the
 * kind that a key's message names (key_unicode_class in key.c).
 */
CREATE FUNCTION idempotency.portable_char_class(c pg_catalog.int4)
RETURNS pg_catalog.text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT CASE
	WHEN c OPERATOR(pg_catalog.<) 32 OR c OPERATOR(pg_catalog.>=) 127 AND c OPERATOR(pg_catalog.<=) 159
		THEN 'control characters'
	WHEN c OPERATOR(pg_catalog.<) 127 AND c OPERATOR(pg_catalog.<>) 32
		THEN NULL
	WHEN c OPERATOR(pg_catalog.=) ANY (ARRAY[32, 160, 5760, 8239, 8287, 12288])
		 OR c OPERATOR(pg_catalog.>=) 8192 AND c OPERATOR(pg_catalog.<=) 8202
		THEN 'white space'
	WHEN c OPERATOR(pg_catalog.=) 8232 OR c OPERATOR(pg_catalog.=) 8233
		THEN 'line or paragraph separators'
	WHEN c OPERATOR(pg_catalog.>=) 64976 AND c OPERATOR(pg_catalog.<=) 65007
		 OR (c OPERATOR(pg_catalog.&) 65534) OPERATOR(pg_catalog.=) 65534
		THEN 'noncharacters'
	-- General_Category Cf of Unicode 15.1, as key.c lists it
	WHEN c OPERATOR(pg_catalog.=) ANY (ARRAY[173, 1564, 1757, 1807, 2274, 6158, 65279, 69821, 69837, 917505])
		 OR c OPERATOR(pg_catalog.>=) 1536 AND c OPERATOR(pg_catalog.<=) 1541
		 OR c OPERATOR(pg_catalog.>=) 2192 AND c OPERATOR(pg_catalog.<=) 2193
		 OR c OPERATOR(pg_catalog.>=) 8203 AND c OPERATOR(pg_catalog.<=) 8207
		 OR c OPERATOR(pg_catalog.>=) 8234 AND c OPERATOR(pg_catalog.<=) 8238
		 OR c OPERATOR(pg_catalog.>=) 8288 AND c OPERATOR(pg_catalog.<=) 8292
		 OR c OPERATOR(pg_catalog.>=) 8294 AND c OPERATOR(pg_catalog.<=) 8303
		 OR c OPERATOR(pg_catalog.>=) 65529 AND c OPERATOR(pg_catalog.<=) 65531
		 OR c OPERATOR(pg_catalog.>=) 78896 AND c OPERATOR(pg_catalog.<=) 78911
		 OR c OPERATOR(pg_catalog.>=) 113824 AND c OPERATOR(pg_catalog.<=) 113827
		 OR c OPERATOR(pg_catalog.>=) 119155 AND c OPERATOR(pg_catalog.<=) 119162
		 OR c OPERATOR(pg_catalog.>=) 917536 AND c OPERATOR(pg_catalog.<=) 917631
		THEN 'format characters'
END
$$;

COMMENT ON FUNCTION idempotency.portable_char_class(pg_catalog.int4) IS
'what a code point is to a key: NULL if printable, else the kind of character a key may not hold';

/*
 * A value as the C edition's messages show it (IdempotencyDisplayValue):
 * a character a key may not hold anywhere, and a backslash, as \xNN byte
 * by byte, cut after 64 bytes on a character's boundary with "...".
 */
CREATE FUNCTION idempotency.portable_display(value pg_catalog.text)
RETURNS pg_catalog.text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	shown pg_catalog.text := '';
	used pg_catalog.int4 := 0;
	ch pg_catalog.text;
	class pg_catalog.text;
	unicode pg_catalog.bool := pg_catalog.current_setting('server_encoding') OPERATOR(pg_catalog.=) 'UTF8';
BEGIN
	FOR i IN 1 .. pg_catalog.length(value) LOOP
		ch := pg_catalog.substr(value, i, 1);
		IF used OPERATOR(pg_catalog.+) pg_catalog.octet_length(ch) OPERATOR(pg_catalog.>) 64 THEN
			RETURN shown OPERATOR(pg_catalog.||) '...';
		END IF;
		used := used OPERATOR(pg_catalog.+) pg_catalog.octet_length(ch);
		class := CASE WHEN unicode OR pg_catalog.octet_length(ch) OPERATOR(pg_catalog.=) 1
					  THEN idempotency.portable_char_class(pg_catalog.ascii(ch)) END;
		IF ch OPERATOR(pg_catalog.=) E'\\' OR class OPERATOR(pg_catalog.<>) 'white space' THEN
			shown := shown OPERATOR(pg_catalog.||)
					 pg_catalog.regexp_replace(pg_catalog.encode(pg_catalog.convert_to(ch, pg_catalog.current_setting('server_encoding')), 'hex'),
											   '(..)', E'\\\\x\\1', 'g');
		ELSE
			shown := shown OPERATOR(pg_catalog.||) ch;
		END IF;
	END LOOP;
	RETURN shown;
END
$$;

COMMENT ON FUNCTION idempotency.portable_display(pg_catalog.text) IS
'a value as the messages show it: what a key may not hold as \xNN, cut after 64 bytes';

/*
 * The key type's rules (key.c's key_in), for the domain's check: every
 * value that becomes an idempotency.key, by a cast or into a column, is
 * checked, with the C type's message.
 */
CREATE FUNCTION idempotency.portable_key_check(pg_catalog.text)
RETURNS pg_catalog.bool
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
	k pg_catalog.text := $1;
	len pg_catalog.int4 := pg_catalog.octet_length($1);
	n pg_catalog.int4;
	unicode pg_catalog.bool;
	class pg_catalog.text;
	what pg_catalog.text;
BEGIN
	IF len OPERATOR(pg_catalog.=) 0 THEN
		what := 'An idempotency key must not be empty.';
	ELSIF len OPERATOR(pg_catalog.>) 255 THEN
		what := pg_catalog.format('An idempotency key must be at most 255 bytes long, but this one is %s bytes long.', len);
	ELSIF k OPERATOR(pg_catalog.!~) '[^!-~]' THEN
		RETURN true;			-- printable ASCII without white space: most keys
	ELSE
		unicode := pg_catalog.current_setting('server_encoding') OPERATOR(pg_catalog.=) 'UTF8';
		n := pg_catalog.length(k);
		FOR i IN 1 .. n LOOP
			IF NOT unicode AND pg_catalog.octet_length(pg_catalog.substr(k, i, 1)) OPERATOR(pg_catalog.>) 1 THEN
				CONTINUE;
			END IF;
			class := idempotency.portable_char_class(pg_catalog.ascii(pg_catalog.substr(k, i, 1)));
			IF class OPERATOR(pg_catalog.=) 'white space' AND i OPERATOR(pg_catalog.>) 1 AND i OPERATOR(pg_catalog.<) n THEN
				CONTINUE;
			END IF;
			IF class IS NOT NULL THEN
				what := pg_catalog.format('An idempotency key must not %s: U+%s at position %s.',
										  CASE class WHEN 'white space' THEN 'begin or end with white space'
										  ELSE 'contain ' OPERATOR(pg_catalog.||) class END,
										  pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(pg_catalog.substr(k, i, 1)))),
														  GREATEST(4, pg_catalog.length(pg_catalog.to_hex(pg_catalog.ascii(pg_catalog.substr(k, i, 1))))), '0'),
										  i);
				EXIT;
			END IF;
		END LOOP;
		IF what IS NULL THEN
			RETURN true;
		END IF;
	END IF;
	RAISE EXCEPTION 'invalid input syntax for type idempotency.key: "%"', idempotency.portable_display(k)
		USING ERRCODE = 'invalid_text_representation', DETAIL = what;
END
$$;

COMMENT ON FUNCTION idempotency.portable_key_check(pg_catalog.text) IS
'true for a valid idempotency key; the key type''s error for any other';
