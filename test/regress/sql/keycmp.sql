--
-- The key type's operators on the default search_path: which operator each
-- comparison resolves to (never a silent text comparison, never an
-- ambiguity), that a key compared with text answers as key with key, and
-- that equality, IN, = ANY, joins and ORDER BY use the key's btree and hash
-- indexes also when the other side is text.  Nothing here sets search_path.
--
SHOW search_path;

-- the operators live where operator lookup always looks
SELECT o.oprnamespace::regnamespace AS schema, o.oprname,
       o.oprleft::regtype, o.oprright::regtype, o.oprcanhash, o.oprcanmerge
  FROM pg_operator AS o
 WHERE 'idempotency.key'::regtype IN (o.oprleft, o.oprright)
 ORDER BY o.oprleft::regtype::text, o.oprright::regtype::text, o.oprname;

-- operator families: key with key, key with text and text with key
SELECT f.opfname, a.amopstrategy AS strategy, a.amoplefttype::regtype AS lefttype,
       a.amoprighttype::regtype AS righttype, a.amopopr::regoperator
  FROM pg_amop AS a JOIN pg_opfamily AS f ON f.oid = a.amopfamily
 WHERE f.opfnamespace = 'idempotency'::regnamespace
 ORDER BY 1, 3::text, 4::text, 2;
SELECT f.opfname, p.amprocnum, p.amproclefttype::regtype AS lefttype,
       p.amprocrighttype::regtype AS righttype, p.amproc::regprocedure
  FROM pg_amproc AS p JOIN pg_opfamily AS f ON f.oid = p.amprocfamily
 WHERE f.opfnamespace = 'idempotency'::regnamespace
 ORDER BY 1, 3::text, 4::text, 2;

CREATE TABLE ko_keys (k idempotency.key PRIMARY KEY, t text, v varchar, c char(6), n int);
INSERT INTO ko_keys
SELECT 'key-' || i, 'key-' || (i * 7 % 2000), 'key-' || i, 'key-' || (i % 9), i
  FROM generate_series(1, 2000) AS i;
ANALYZE ko_keys;

/*
 * resolved(expression): the operators an expression over ko_keys (alias c)
 * resolves to, read from the dependencies of a view that holds it.
 */
CREATE FUNCTION resolved(expression text) RETURNS SETOF regoperator
LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('CREATE TEMP VIEW resolved_view AS SELECT %s AS x FROM ko_keys AS c', expression);
	RETURN QUERY
		SELECT DISTINCT d.refobjid::regoperator
		  FROM pg_depend AS d JOIN pg_rewrite AS r ON r.oid = d.objid
		 WHERE r.ev_class = 'resolved_view'::regclass
		   AND d.refclassid = 'pg_operator'::regclass
		 ORDER BY 1;
	DROP VIEW resolved_view;
END $$;

-- key with a literal, with text (and what casts to text), in both orders
SELECT resolved($$c.k = 'key-1'$$);
SELECT resolved($$'key-1' = c.k$$);
SELECT resolved($$c.k = c.t$$);
SELECT resolved($$c.t = c.k$$);
SELECT resolved($$c.k = c.v$$);
SELECT resolved($$c.v = c.k$$);
SELECT resolved($$c.k = c.c$$);
SELECT resolved($$c.k = 'key-1'::varchar$$);
SELECT resolved($$c.k <> c.t$$);
SELECT resolved($$c.k != 'key-1'$$);
SELECT resolved($$c.k < c.t$$);
SELECT resolved($$c.t <= c.k$$);
SELECT resolved($$c.k > 'key-1'$$);
SELECT resolved($$c.t >= c.k$$);
SELECT resolved($$c.k = c.k$$);
-- IN and = ANY
SELECT resolved($$c.k IN ('key-1', 'key-2')$$);
SELECT resolved($$c.k IN (c.t, 'key-2')$$);
SELECT resolved($$c.k NOT IN ('key-1', 'key-2')$$);
SELECT resolved($$c.k = ANY (ARRAY['key-1', 'key-2'])$$);
SELECT resolved($$c.k = ANY ('{key-1,key-2}')$$);
SELECT resolved($$c.k = ANY (ARRAY[c.t])$$);
SELECT resolved($$c.k IN (SELECT t FROM ko_keys)$$);
SELECT resolved($$c.t IN (SELECT k FROM ko_keys)$$);
-- comparisons that do not involve a key are untouched
SELECT resolved($$'a' = 'b'$$);
SELECT resolved($$c.t = 'key-1'$$);
SELECT resolved($$c.v = 'key-1'$$);
SELECT resolved($$c.t < c.v$$);
-- the key's text form still serves text functions and pattern matching
SELECT resolved($$c.k || '!'$$);
SELECT resolved($$c.k LIKE 'key-1%'$$);
-- a name has no implicit cast to a key or to text alone: say which you mean
SELECT resolved($$c.k = current_user$$);
SELECT resolved($$c.k = current_user::text$$);

-- a key compared with text answers exactly as a key compared with a key
CREATE TEMP TABLE ko_values (s text);
INSERT INTO ko_values VALUES ('a'), ('b'), ('A'), ('ab'), ('a b'), ('é'), ('e'), ('z'),
	('key-10'), ('key-9'), ('ключ'), ('🙂'), (repeat('x', 255));
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE (x.s::idempotency.key = y.s) IS DISTINCT FROM (x.s::idempotency.key = y.s::idempotency.key)
                           OR (x.s::idempotency.key <> y.s) IS DISTINCT FROM (x.s::idempotency.key <> y.s::idempotency.key)
                           OR (x.s::idempotency.key < y.s) IS DISTINCT FROM (x.s::idempotency.key < y.s::idempotency.key)
                           OR (x.s::idempotency.key <= y.s) IS DISTINCT FROM (x.s::idempotency.key <= y.s::idempotency.key)
                           OR (x.s::idempotency.key > y.s) IS DISTINCT FROM (x.s::idempotency.key > y.s::idempotency.key)
                           OR (x.s::idempotency.key >= y.s) IS DISTINCT FROM (x.s::idempotency.key >= y.s::idempotency.key)
                           OR (x.s = y.s::idempotency.key) IS DISTINCT FROM (x.s::idempotency.key = y.s::idempotency.key)
                           OR (x.s <> y.s::idempotency.key) IS DISTINCT FROM (x.s::idempotency.key <> y.s::idempotency.key)
                           OR (x.s < y.s::idempotency.key) IS DISTINCT FROM (x.s::idempotency.key < y.s::idempotency.key)
                           OR (x.s <= y.s::idempotency.key) IS DISTINCT FROM (x.s::idempotency.key <= y.s::idempotency.key)
                           OR (x.s > y.s::idempotency.key) IS DISTINCT FROM (x.s::idempotency.key > y.s::idempotency.key)
                           OR (x.s >= y.s::idempotency.key) IS DISTINCT FROM (x.s::idempotency.key >= y.s::idempotency.key)
                           OR idempotency.key_text_cmp(x.s::idempotency.key, y.s) <> idempotency.key_cmp(x.s::idempotency.key, y.s::idempotency.key)
                           OR idempotency.text_key_cmp(x.s, y.s::idempotency.key) <> idempotency.key_cmp(x.s::idempotency.key, y.s::idempotency.key)
                           OR (x.s::idempotency.key = y.s AND idempotency.key_hash(x.s::idempotency.key) <> idempotency.key_hash_text(y.s))
                           OR (x.s::idempotency.key = y.s AND idempotency.key_hash_extended(x.s::idempotency.key, 42) <> idempotency.key_hash_text_extended(y.s, 42))
                       ) AS disagreements
  FROM ko_values AS x, ko_values AS y;
-- bytewise, whatever the text's collation
SELECT 'B'::idempotency.key < 'a'::text AS upper_first,
       'a'::idempotency.key = 'a'::text COLLATE "C" AS explicit_collation,
       'é'::idempotency.key > 'z'::text AS utf8_bytes_after_ascii;
-- a text that is not a valid key equals no key; a literal is read as a key
SELECT 'a'::idempotency.key = ''::text AS empty, 'a'::idempotency.key = ' a'::text AS padded,
       'a'::idempotency.key <> E'a\n'::text AS control, 'a'::idempotency.key < repeat('a', 300) AS long;
SELECT count(*) FROM ko_keys WHERE k = ANY (ARRAY['', 'key-1', E'key-2\n']::text[]);
SELECT count(*) FROM ko_keys WHERE k = '';
SELECT count(*) FROM ko_keys WHERE k = NULL::text;

-- plans: the key's btree index, whatever the other side's type
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM ko_keys WHERE k = 'key-5';
EXPLAIN (COSTS OFF) SELECT * FROM ko_keys WHERE k = 'key-5'::text;
EXPLAIN (COSTS OFF) SELECT * FROM ko_keys WHERE 'key-5'::text = k;
EXPLAIN (COSTS OFF) SELECT * FROM ko_keys WHERE k = 'key-5'::varchar;
EXPLAIN (COSTS OFF) SELECT * FROM ko_keys WHERE k IN ('key-5', 'key-6');
EXPLAIN (COSTS OFF) SELECT * FROM ko_keys WHERE k BETWEEN 'key-5'::text AND 'key-6';
EXPLAIN (COSTS OFF) SELECT k FROM ko_keys ORDER BY k LIMIT 3;
EXPLAIN (COSTS OFF) SELECT k FROM ko_keys ORDER BY k DESC LIMIT 3;
SELECT k FROM ko_keys WHERE k > 'key-1997'::text AND k < 'key-2'::text ORDER BY k;
-- a driver's typed parameters, as a generic plan
SET plan_cache_mode = force_generic_plan;
PREPARE ko_one(text) AS SELECT n FROM ko_keys WHERE k = $1;
EXPLAIN (COSTS OFF) EXECUTE ko_one('key-7');
EXECUTE ko_one('key-7');
PREPARE ko_any(text[]) AS SELECT n FROM ko_keys WHERE k = ANY ($1) ORDER BY n;
EXPLAIN (COSTS OFF) EXECUTE ko_any('{key-7,key-8}');
EXECUTE ko_any('{key-7,key-8}');
PREPARE ko_in(text, text) AS SELECT n FROM ko_keys WHERE k IN ($1, $2) ORDER BY n;
EXPLAIN (COSTS OFF) EXECUTE ko_in('key-7', 'key-8');
EXECUTE ko_in('key-7', 'key-8');
DEALLOCATE ko_one;
DEALLOCATE ko_any;
DEALLOCATE ko_in;
RESET plan_cache_mode;
-- a PL/pgSQL text variable
CREATE FUNCTION ko_plan(wanted text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
BEGIN
	RETURN QUERY EXPLAIN (COSTS OFF) SELECT n FROM ko_keys WHERE k = wanted;
END $$;
SELECT ko_plan('key-9');
CREATE FUNCTION ko_lookup(wanted text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
	found_n int;
BEGIN
	SELECT n INTO found_n FROM ko_keys WHERE k = wanted;
	RETURN found_n;
END $$;
SELECT ko_lookup('key-9'), ko_lookup('no-such-key'), ko_lookup('');

-- joins: key to text through the key's index (nested loop) or hashed
RESET enable_seqscan;
EXPLAIN (COSTS OFF) SELECT a.n, b.n FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.t WHERE b.n < 3;
SELECT a.n, b.n FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.t WHERE b.n < 3 ORDER BY b.n;
EXPLAIN (COSTS OFF) SELECT a.n, b.n FROM ko_keys AS a JOIN ko_keys AS b ON b.t = a.k WHERE b.n < 3;
SET enable_nestloop = off;
SET enable_mergejoin = off;
-- (PostgreSQL 18 would remove the self-joins on the key below)
DO $$
BEGIN
	IF pg_catalog.current_setting('server_version_num')::int >= 180000 THEN
		PERFORM pg_catalog.set_config('enable_self_join_elimination', 'off', false);
	END IF;
END $$;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.t;
SELECT count(*) FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.t;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.k;
SELECT count(*) FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.k;
-- a merge join needs a bytewise order on the text side, which does not
-- exist: the planner falls back to another join, it does not fail
RESET enable_mergejoin;
SET enable_hashjoin = off;
SELECT count(*) FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.t;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ko_keys AS a JOIN ko_keys AS b ON a.k = b.k;
RESET enable_nestloop;
RESET enable_hashjoin;
-- semi-joins with text on either side: the text side is hashed, or
-- de-duplicated byte for byte (idempotency.~=~) to probe the key's index
CREATE TABLE ko_texts (t text);
INSERT INTO ko_texts SELECT 'key-' || (i % 5) FROM generate_series(1, 50) AS i;
INSERT INTO ko_texts VALUES ('KEY-1'), ('key-1 '), ('');
ANALYZE ko_texts;
EXPLAIN (COSTS OFF) SELECT n FROM ko_keys WHERE k IN (SELECT t FROM ko_texts);
SELECT n FROM ko_keys WHERE k IN (SELECT t FROM ko_texts) ORDER BY n;
EXPLAIN (COSTS OFF) SELECT count(*) FROM ko_keys WHERE k IN (SELECT t FROM ko_keys);
SELECT count(*) FROM ko_keys WHERE k IN (SELECT t FROM ko_keys);
SELECT count(*) FROM ko_keys WHERE t IN (SELECT k FROM ko_keys WHERE n <= 1000);
-- hashed subplans, IN and NOT IN
EXPLAIN (COSTS OFF) SELECT count(*) FROM ko_keys WHERE k IN (SELECT t FROM ko_texts) OR n < 0;
SELECT count(*) FROM ko_keys WHERE k IN (SELECT t FROM ko_texts) OR n < 0;
SELECT count(*) FROM ko_keys WHERE k NOT IN (SELECT t FROM ko_texts);
SELECT count(*) FROM ko_keys WHERE k IN ('key-1', 'key-2', 'key-3');
SELECT count(*) FROM ko_keys WHERE k NOT IN ('key-1', 'key-2', 'key-3');
-- a long IN list of text values
SELECT count(*) FROM ko_keys WHERE k = ANY (ARRAY(SELECT 'key-' || i FROM generate_series(1, 40) AS i));
SELECT count(*) FROM ko_keys WHERE k <> ALL (ARRAY(SELECT 'key-' || i FROM generate_series(1, 40) AS i));

-- a nondeterministic collation on the text side is refused: text's own
-- equality under it (which a memoized join would use) is not bytewise
CREATE COLLATION ko_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE ko_ci_texts (t text COLLATE ko_ci);
INSERT INTO ko_ci_texts VALUES ('key-1'), ('KEY-1');
SELECT count(*) FROM ko_keys AS a JOIN ko_ci_texts AS b ON a.k = b.t;
SELECT 'a'::idempotency.key = 'A'::text COLLATE ko_ci;
SELECT count(*) FROM ko_keys AS a JOIN ko_ci_texts AS b ON a.k = b.t COLLATE "C";
SELECT count(*) FROM ko_keys AS a JOIN ko_ci_texts AS b ON a.k = b.t::idempotency.key;
-- in a transaction, under a savepoint and in PL/pgSQL, the work around it commits
BEGIN;
INSERT INTO ko_texts VALUES ('in-transaction');
SAVEPOINT before_compare;
SELECT 'a'::idempotency.key < 'A'::text COLLATE ko_ci;
ROLLBACK TO SAVEPOINT before_compare;
INSERT INTO ko_texts VALUES ('after-savepoint');
COMMIT;
BEGIN;
SELECT 'a'::idempotency.key <> 'A'::text COLLATE ko_ci;
ROLLBACK;
DO $$
BEGIN
	PERFORM 'A'::text COLLATE ko_ci = 'a'::idempotency.key;
EXCEPTION WHEN feature_not_supported THEN
	RAISE NOTICE 'caught SQLSTATE %: %', SQLSTATE, SQLERRM;
	INSERT INTO ko_texts VALUES ('in-exception-block');
END $$;
SELECT t FROM ko_texts WHERE t LIKE 'in-%' OR t LIKE 'after-%' ORDER BY t;
DROP TABLE ko_ci_texts;
DROP COLLATION ko_ci;

-- the key's hash index, with key and with text
SET enable_seqscan = off;
ALTER TABLE ko_keys DROP CONSTRAINT ko_keys_pkey;
CREATE INDEX ko_keys_hash ON ko_keys USING hash (k);
EXPLAIN (COSTS OFF) SELECT n FROM ko_keys WHERE k = 'key-5';
EXPLAIN (COSTS OFF) SELECT n FROM ko_keys WHERE k = 'key-5'::text;
EXPLAIN (COSTS OFF) SELECT n FROM ko_keys WHERE 'key-5'::text = k;
SELECT n FROM ko_keys WHERE k = 'key-5'::text;
SELECT n FROM ko_keys WHERE 'key-5'::varchar = k;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- hash partitions are pruned on a text value exactly as on a key
CREATE TABLE ko_parted (k idempotency.key PRIMARY KEY, n int) PARTITION BY HASH (k);
CREATE TABLE ko_parted_0 PARTITION OF ko_parted FOR VALUES WITH (MODULUS 4, REMAINDER 0);
CREATE TABLE ko_parted_1 PARTITION OF ko_parted FOR VALUES WITH (MODULUS 4, REMAINDER 1);
CREATE TABLE ko_parted_2 PARTITION OF ko_parted FOR VALUES WITH (MODULUS 4, REMAINDER 2);
CREATE TABLE ko_parted_3 PARTITION OF ko_parted FOR VALUES WITH (MODULUS 4, REMAINDER 3);
INSERT INTO ko_parted SELECT 'p-' || i, i FROM generate_series(1, 200) AS i;
SELECT count(*) AS found_through_text
  FROM generate_series(1, 200) AS i
 WHERE (SELECT p.n FROM ko_parted AS p WHERE p.k = ('p-' || i)::text) = i;
EXPLAIN (COSTS OFF) SELECT n FROM ko_parted WHERE k = 'p-17';
EXPLAIN (COSTS OFF) SELECT n FROM ko_parted WHERE k = 'p-17'::text;
SET plan_cache_mode = force_generic_plan;
PREPARE ko_part(text) AS SELECT n FROM ko_parted WHERE k = $1;
EXPLAIN (COSTS OFF) EXECUTE ko_part('p-17');
EXECUTE ko_part('p-17');
DEALLOCATE ko_part;
RESET plan_cache_mode;

-- the registry through my_records, with a literal and with a text value
CREATE ROLE regress_ko_user;
SELECT idempotency.grant_usage('regress_ko_user');
SET ROLE regress_ko_user;
SELECT outcome FROM idempotency.idempotent_begin('ko-1', external => true);
SELECT idempotency.idempotent_finish('ko-1', '{"ok": true}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'ko-1' AND r.scope = ''));
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT status FROM idempotency.my_records WHERE key = 'ko-1';
EXPLAIN (COSTS OFF) SELECT status FROM idempotency.my_records WHERE key = 'ko-1'::text;
SELECT status FROM idempotency.my_records WHERE key = 'ko-1'::text;
RESET enable_seqscan;
RESET enable_bitmapscan;
RESET ROLE;

-- the charges table of doc/key-type.md
CREATE TABLE charges (key idempotency.key PRIMARY KEY, order_id text, amount int);
INSERT INTO charges
SELECT idempotency.make_key('order', 'ORD' || i, 'pay'), 'ORD' || i, i FROM generate_series(1, 1000) AS i;
ANALYZE charges;
EXPLAIN (COSTS OFF) SELECT amount FROM charges WHERE key = 'order:ORD20:pay:v1:00000000';
EXPLAIN (COSTS OFF) SELECT amount FROM charges WHERE key = idempotency.make_key('order', 'ORD20', 'pay');
SELECT amount FROM charges WHERE key = idempotency.make_key('order', 'ORD20', 'pay')::text;

DROP TABLE charges, ko_keys, ko_texts, ko_parted;
DROP FUNCTION resolved(text);
DROP FUNCTION ko_plan(text);
DROP FUNCTION ko_lookup(text);
TRUNCATE idempotency.registry;
DROP OWNED BY regress_ko_user;
DROP ROLE regress_ko_user;
