--
-- What "printable" means for idempotency.key in a UTF8 database: no control
-- characters (C0, DEL, C1), format characters (Cf), line or paragraph
-- separators, or noncharacters anywhere, and no white space (Zs) at either
-- end.  Every way in (text input, the casts, make_key, binary input) shares
-- the check.  Other encodings: test/tap/011_key_encodings.pl.
-- Also: the NULL arguments of grant_usage and drop_state_machine.
--
SET search_path = public;

-- try_key(value): accepted, or the SQLSTATE and DETAIL of the refusal
CREATE FUNCTION try_key(value text, OUT verdict text, OUT detail text) LANGUAGE plpgsql AS $$
DECLARE
	k idempotency.key;
BEGIN
	k := value::idempotency.key;
	verdict := 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS verdict = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL;
END $$;

-- anywhere in a key
SELECT note, (try_key('a' || ch || 'b')).*
  FROM (VALUES ('U+0001', E'\u0001'), ('tab', E'\t'), ('U+001F', E'\u001f'), ('DEL', E'\u007f'),
			   ('U+0080', E'\u0080'), ('NEL', E'\u0085'), ('U+009F', E'\u009f'),
			   ('soft hyphen', E'\u00ad'), ('arabic number sign', E'\u0600'), ('ALM', E'\u061c'),
			   ('mongolian vowel sep.', E'\u180e'), ('ZWSP', E'\u200b'), ('ZWNJ', E'\u200c'),
			   ('ZWJ', E'\u200d'), ('LRM', E'\u200e'), ('RLM', E'\u200f'), ('LRE', E'\u202a'),
			   ('RLO', E'\u202e'), ('word joiner', E'\u2060'), ('invisible plus', E'\u2064'),
			   ('LRI', E'\u2066'), ('PDI', E'\u2069'), ('U+206F', E'\u206f'), ('BOM', E'\ufeff'),
			   ('U+FFF9', E'\ufff9'), ('U+FFFB', E'\ufffb'), ('U+110BD', E'\U000110bd'),
			   ('U+1343F', E'\U0001343f'), ('U+1D173', E'\U0001d173'), ('language tag', E'\U000e0001'),
			   ('tag a', E'\U000e0061'), ('cancel tag', E'\U000e007f'),
			   ('line separator', E'\u2028'), ('paragraph separator', E'\u2029'),
			   ('U+FDD0', E'\ufdd0'), ('U+FDEF', E'\ufdef'), ('U+FFFE', E'\ufffe'), ('U+FFFF', E'\uffff'),
			   ('U+1FFFE', E'\U0001fffe'), ('U+10FFFF', E'\U0010ffff')) AS v(note, ch);

-- white space: fine inside, refused at either end
SELECT note, (try_key('a' || ch || 'b')).verdict AS inside,
	   (try_key(ch || 'ab')).verdict AS leading, (try_key('ab' || ch)).verdict AS trailing,
	   (try_key(ch || 'ab')).detail AS detail
  FROM (VALUES ('space', ' '), ('NBSP', E'\u00a0'), ('ogham space', E'\u1680'), ('en quad', E'\u2000'),
			   ('hair space', E'\u200a'), ('NNBSP', E'\u202f'), ('math space', E'\u205f'),
			   ('ideographic space', E'\u3000')) AS v(note, ch);

-- printable: letters, marks, symbols, emoji, private use, unassigned code
-- points (the rule must not change when Unicode grows), and characters that
-- only look blank
SELECT note, (try_key(ch)).verdict
  FROM (VALUES ('ascii', 'order:1'), ('cyrillic', 'ключ'), ('cjk', '注文'), ('emoji', '🙂'),
			   ('emoji ZWJ sequence: refused, ZWJ is Cf', E'\U0001f469\u200d\U0001f4bb'), ('combining mark', E'e\u0301'),
			   ('leading combining mark', E'\u0301e'), ('variation selector', E'\u2764\ufe0f'),
			   ('private use', E'\ue000'), ('plane 15 private use', E'\U000f0000'),
			   ('unassigned U+0378', E'\u0378'), ('hangul filler', E'\u3164'), ('braille blank', E'\u2800'),
			   ('U+2065 (unassigned)', E'\u2065'), ('U+FFFD', E'\ufffd'), ('U+00A1', E'\u00a1'),
			   ('U+00A0 inside', E'x\u00a0y')) AS v(note, ch);

-- the message: the value with what a key may not contain escaped, the
-- character and its position (in characters, from 1)
SELECT E'ключ\u202eyek'::idempotency.key;
SELECT E'\u3000ключ'::idempotency.key;
SELECT E'ключ\u3000'::idempotency.key;
SELECT E'🙂🙂\u2028'::idempotency.key;
SELECT E'a\\b\u0085'::idempotency.key;

-- every way in shares the check
SELECT E'a\u200bb'::text::idempotency.key;
SELECT E'a\u200bb'::varchar::idempotency.key;
SELECT idempotency.key_in(E'a\u200bb'::cstring);
SELECT idempotency.make_key('order', E'\u00a0ORD1', 'pay');
SELECT idempotency.make_key('order', E'ORD1\ufeff', 'pay');
SELECT idempotency.make_key(E'\u00a0order', 'ORD1', 'pay');
CREATE TABLE k (k idempotency.key);
INSERT INTO k VALUES (E'a\u2029b');
INSERT INTO k VALUES (E'a\u2029b'::text);
COPY k FROM stdin;
 ab
\.
SELECT count(*) FROM k;
DROP TABLE k;

-- the error in every kind of transaction, each followed by work that
-- commits
CREATE TABLE work (note text);
SELECT E'a\u200bb'::idempotency.key;
INSERT INTO work VALUES ('after autocommit');
BEGIN;
SELECT E'a\u200bb'::idempotency.key;
ROLLBACK;
INSERT INTO work VALUES ('after a transaction');
BEGIN;
INSERT INTO work VALUES ('before a savepoint');
SAVEPOINT s;
SELECT E'a\u200bb'::idempotency.key;
ROLLBACK TO SAVEPOINT s;
INSERT INTO work VALUES ('after a savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM E'a\u200bb'::idempotency.key;
	EXCEPTION WHEN invalid_text_representation THEN
		RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
	END;
	INSERT INTO public.work VALUES ('after an exception block');
END $$;
SELECT note FROM work ORDER BY note;

-- NULL arguments: 22004
SELECT idempotency.grant_usage(NULL);
SELECT idempotency.drop_state_machine(NULL);
BEGIN;
INSERT INTO work VALUES ('before NULL arguments');
SAVEPOINT s;
SELECT idempotency.grant_usage(NULL);
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.drop_state_machine(NULL);
ROLLBACK TO SAVEPOINT s;
INSERT INTO work VALUES ('after NULL arguments');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.grant_usage(NULL);
	EXCEPTION WHEN null_value_not_allowed THEN
		RAISE NOTICE 'grant_usage: caught SQLSTATE %', SQLSTATE;
	END;
	BEGIN
		PERFORM idempotency.drop_state_machine(NULL);
	EXCEPTION WHEN null_value_not_allowed THEN
		RAISE NOTICE 'drop_state_machine: caught SQLSTATE %', SQLSTATE;
	END;
	INSERT INTO public.work VALUES ('after NULL arguments in an exception block');
END $$;
SELECT note FROM work WHERE note LIKE '%NULL%' ORDER BY note;

DROP TABLE work;
DROP FUNCTION try_key(text);
RESET search_path;
