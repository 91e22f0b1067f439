--
-- Structured keys: make_key() and parse_key()
--
SET search_path = pg_catalog;

SELECT idempotency.make_key('order', 'ORD20260711001', 'pay');
SELECT idempotency.make_key('order', 'ORD20260711001', 'pay', 'v2');
SELECT idempotency.make_key('order', 'ORD20260711001', 'pay')::text LIKE 'order:ORD20260711001:pay:v1:%' AS seeds_shape;
-- the checksum is the first 8 hex digits of SHA-256 over the first four parts
SELECT split_part(idempotency.make_key('order', 'ORD20260711001', 'pay')::text, ':', 5)
       = left(encode(sha256('order:ORD20260711001:pay:v1'), 'hex'), 8) AS checksum_is_sha256;
-- the extension computes SHA-256 itself (src/utils.c): the same as sha256()
-- at every length across the 64-byte blocks and their padding (8 to 237 bytes)
SELECT count(*) AS mismatches FROM generate_series(1, 230) AS n
 WHERE split_part(idempotency.make_key('p', repeat('x', n), 'o')::text, ':', 5)
       <> left(encode(sha256(convert_to('p:' || repeat('x', n) || ':o:v1', 'UTF8')), 'hex'), 8);
-- STRICT: a NULL part gives NULL
SELECT idempotency.make_key('order', NULL, 'pay') IS NULL AS null_part;

-- bad parts
SELECT idempotency.make_key('', 'ORD1', 'pay');
SELECT idempotency.make_key('order', '', 'pay');
SELECT idempotency.make_key('order', 'ORD1', '');
SELECT idempotency.make_key('order', 'ORD1', 'pay', '');
SELECT idempotency.make_key('order', 'ORD:1', 'pay');
SELECT idempotency.make_key('order', 'ORD1', 'pay', 'v:1');
-- the result must still be a valid key
SELECT idempotency.make_key('order', repeat('9', 250), 'pay');
SELECT idempotency.make_key('order', E'ORD\t1', 'pay');
SELECT idempotency.make_key(' order', 'ORD1', 'pay');

-- parse_key splits a structured key and checks its checksum
SELECT * FROM idempotency.parse_key(idempotency.make_key('order', 'ORD20260711001', 'pay'));
-- a hand-edited key is detectable
SELECT * FROM idempotency.parse_key(replace(idempotency.make_key('order', 'ORD20260711001', 'pay')::text, 'ORD20260711001', 'ORD20260711002')::idempotency.key);
-- an upper-case checksum is not what make_key writes
SELECT checksum_ok FROM idempotency.parse_key(upper(idempotency.make_key('order', 'ORD1', 'pay')::text)::idempotency.key);
-- opaque keys: no row
SELECT count(*) FROM idempotency.parse_key('550e8400-e29b-41d4-a716-446655440000');
SELECT count(*) FROM idempotency.parse_key('a:b:c:d');
SELECT count(*) FROM idempotency.parse_key('a:b:c:d:e:f');
SELECT count(*) FROM idempotency.parse_key('a::c:d:0123abcd');
SELECT count(*) FROM idempotency.parse_key('a:b:c:d:0123abc');
SELECT count(*) FROM idempotency.parse_key('a:b:c:d:0123abcg');
SELECT count(*) FROM idempotency.parse_key('a:b:c:d:');
-- a well-formed key with the wrong checksum parses, with checksum_ok false
SELECT * FROM idempotency.parse_key('a:b:c:d:00000000');
-- works over a column
SELECT p.operation, p.checksum_ok
  FROM (VALUES (idempotency.make_key('o', '1', 'pay')), (idempotency.make_key('o', '1', 'refund')), ('opaque')) AS v(k),
       LATERAL idempotency.parse_key(v.k) AS p
 ORDER BY 1;
RESET search_path;

-- parse_key takes text, as every function taking a key does: a text or
-- varchar value needs no cast, and the key type's rules apply to it
SELECT * FROM idempotency.parse_key('order:ORD1:pay:v1:00000000'::text);
SELECT * FROM idempotency.parse_key('order:ORD1:pay:v1:00000000'::varchar);
SELECT count(*) FROM idempotency.parse_key(idempotency.make_key('order', 'ORD1', 'pay')::text);
SELECT prefix FROM (VALUES ('order:ORD1:pay:v1:00000000'::varchar(40))) AS v(k),
       LATERAL idempotency.parse_key(v.k);
DO $$
DECLARE
	k text := idempotency.make_key('order', 'ORD1', 'pay');
	ok boolean;
BEGIN
	SELECT p.checksum_ok INTO ok FROM idempotency.parse_key(k) AS p;
	RAISE NOTICE 'checksum_ok from a text variable: %', ok;
END $$;
SELECT * FROM idempotency.parse_key(' order:ORD1:pay:v1:00000000'::text);
