--
-- The idempotency.key type: input rules, output, casts, comparison, hashing
-- and its use as a UNIQUE, merge-joined, hash-joined and hash-partitioned
-- column.
--
SET search_path = pg_catalog;

-- valid keys come back unchanged
SELECT 'order:ORD1:pay:v1'::idempotency.key;
SELECT '550e8400-e29b-41d4-a716-446655440000'::idempotency.key;
SELECT 'a'::idempotency.key, 'ключ-🙂'::idempotency.key;
SELECT length(repeat('x', 255)::idempotency.key::text);
SELECT 'inner space is fine'::idempotency.key;

-- invalid keys: 22P02 naming the type and the value
SELECT ''::idempotency.key;
SELECT repeat('x', 256)::idempotency.key;
SELECT (repeat('é', 128))::idempotency.key;   -- 256 bytes
SELECT E'tab\there'::idempotency.key;
SELECT E'new\nline'::idempotency.key;
SELECT (chr(127) || 'del')::idempotency.key;
SELECT ('c1' || chr(133))::idempotency.key;   -- U+0085, a C1 control
SELECT ' leading'::idempotency.key;
SELECT 'trailing '::idempotency.key;
SELECT ' '::idempotency.key;
-- the message shows at most 64 bytes of a long value
SELECT repeat('abcdefgh', 40)::idempotency.key;
DO $$
BEGIN
	PERFORM ''::idempotency.key;
EXCEPTION WHEN invalid_text_representation THEN
	RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
END $$;

-- casts: text and varchar on assignment, checked; to text implicitly
CREATE TEMP TABLE k (k idempotency.key);
INSERT INTO k VALUES ('from-literal');
INSERT INTO k VALUES ('from-text'::text);
INSERT INTO k VALUES ('from-varchar'::varchar);
INSERT INTO k VALUES (''::text);
INSERT INTO k VALUES (' bad'::varchar);
SELECT k, upper(k), k || '!' AS concatenated, length(k) FROM k ORDER BY k;
SELECT 'x'::text::idempotency.key, 'y'::varchar::idempotency.key;
-- no implicit cast from text: this needs an explicit one
SELECT idempotency.key_eq('a'::text, 'a'::idempotency.key);
DROP TABLE k;

-- comparison is bytewise, whatever the collation
SELECT 'a'::idempotency.key OPERATOR(pg_catalog.<) 'b'::idempotency.key AS lt,
       'B'::idempotency.key OPERATOR(pg_catalog.<) 'a'::idempotency.key AS upper_first,
       'ab'::idempotency.key OPERATOR(pg_catalog.>) 'a'::idempotency.key AS longer_after,
       'a'::idempotency.key OPERATOR(pg_catalog.=) 'a'::idempotency.key AS eq,
       'a'::idempotency.key OPERATOR(pg_catalog.<>) 'A'::idempotency.key AS ne,
       'b'::idempotency.key OPERATOR(pg_catalog.>=) 'b'::idempotency.key AS ge,
       'b'::idempotency.key OPERATOR(pg_catalog.<=) 'a'::idempotency.key AS le;
SELECT idempotency.key_cmp('a', 'b'), idempotency.key_cmp('b', 'a'), idempotency.key_cmp('a', 'a');
SET search_path = idempotency, pg_catalog;
SELECT k FROM (VALUES ('b'::key), ('a'), ('B'), ('ab'), ('é'), ('A')) AS v(k) ORDER BY k;

-- equal keys hash equally; support 2 depends on the seed
SELECT key_hash('same') = key_hash(('sa' || 'me')::key) AS same_hash,
       key_hash_extended('same', 0) = key_hash_extended('same', 0) AS same_ext,
       key_hash_extended('same', 0) <> key_hash_extended('same', 1) AS seeded;
-- and the hash is the documented one: hash_any over the bytes, as for text
SELECT key_hash('order:1') = hashtext('order:1') AS matches_text_hash,
       key_hash_extended('order:1', 7) = hashtextextended('order:1', 7) AS matches_text_hash_ext;

-- operator classes: UNIQUE index, merge join, hash join, hash partitioning
CREATE TEMP TABLE payments (k key UNIQUE, amount int);
INSERT INTO payments VALUES ('order:1', 10), ('order:2', 20);
INSERT INTO payments VALUES ('order:1', 99);
CREATE TEMP TABLE refunds (k key, amount int);
INSERT INTO refunds VALUES ('order:2', 5), ('order:3', 7);
SET enable_hashjoin = off; SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT * FROM payments p JOIN refunds r USING (k);
SELECT * FROM payments p JOIN refunds r USING (k);
RESET enable_hashjoin; SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT * FROM payments p JOIN refunds r USING (k);
SELECT * FROM payments p JOIN refunds r USING (k);
RESET enable_mergejoin; RESET enable_nestloop;
SELECT count(DISTINCT k) FROM (VALUES ('a'::key), ('a'), ('b')) AS v(k);
SELECT k, count(*) FROM (VALUES ('a'::key), ('a'), ('b')) AS v(k) GROUP BY k ORDER BY k;

CREATE TEMP TABLE parted (k key PRIMARY KEY, v int) PARTITION BY HASH (k);
CREATE TEMP TABLE parted_0 PARTITION OF parted FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TEMP TABLE parted_1 PARTITION OF parted FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO parted SELECT 'key-' || i, i FROM generate_series(1, 20) AS i;
SELECT count(*) > 0 AS p0_used FROM parted_0;
SELECT count(*) > 0 AS p1_used FROM parted_1;
SELECT count(*) FROM parted;
INSERT INTO parted VALUES ('key-7', 0);
-- partition pruning works with the hash opclass
EXPLAIN (COSTS OFF) SELECT * FROM parted WHERE k = 'key-3';
DROP TABLE payments, refunds, parted;

-- binary output (the receive side is tested with COPY BINARY in test/tap)
SELECT key_send('abc');
RESET search_path;
