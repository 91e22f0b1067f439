--
-- State machines at their limits: 10000 states, 100000 transitions, state
-- names of 255 bytes.  A machine at the limits works and stays small in each
-- backend; one past them is refused with 54000 (22023 for a long name), by
-- define_state_machine and, for a row written around it, by every reader.
--
SET search_path = public;

-- machine(n, k): n states s1 .. sn, each moving to the k states after it
CREATE FUNCTION machine(n int, k int) RETURNS jsonb LANGUAGE sql AS $$
	SELECT jsonb_object_agg('s' || i, (SELECT jsonb_agg('s' || ((i + j - 1) % n + 1))
										 FROM generate_series(1, k) AS j))
	  FROM generate_series(1, n) AS i
$$;

-- at the limits: 10000 states, 100000 transitions
SELECT idempotency.define_state_machine('big', machine(10000, 10), '{s1}');
SELECT count(*) AS transitions, count(DISTINCT from_state) AS states
  FROM idempotency.state_machine_transitions('big');
SELECT idempotency.transition_allowed('big', 's1', 's2') AS s1_s2,
	   idempotency.transition_allowed('big', 's9999', 's9') AS s9999_s9,
	   idempotency.transition_allowed('big', 's10000', 's10') AS s10000_s10,
	   idempotency.transition_allowed('big', 's1', 's12') AS s1_s12,
	   idempotency.transition_allowed('big', 's5000', 's5000') AS staying,
	   idempotency.transition_allowed('big', 's1', 's10001') AS unknown;
-- each backend's copy is linear in the size: well under 2 MB here (the old
-- nstates x nstates matrix alone was 100 MB)
SELECT total_bytes < 2 * 1024 * 1024 AS small_cache
  FROM pg_backend_memory_contexts
 WHERE name = 'idempotency state machine' AND ident = 'big';
-- the trigger works with it, and its messages stay short
CREATE TABLE walk (id int PRIMARY KEY, state text NOT NULL);
CREATE TRIGGER walk_state BEFORE INSERT OR UPDATE ON walk
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('big', 'state');
INSERT INTO walk VALUES (1, 's1');
UPDATE walk SET state = 's5' WHERE id = 1;
UPDATE walk SET state = 's20' WHERE id = 1;
INSERT INTO walk VALUES (2, 's2');
DROP TABLE walk;

-- one state too many
SELECT idempotency.define_state_machine('too_many_states', machine(10001, 1));
-- one transition too many
SELECT idempotency.define_state_machine('too_many_transitions',
	machine(10000, 10) || '{"s1": ["s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12"]}');
-- state names: 255 bytes are fine, 256 are not
SELECT idempotency.define_state_machine('long_names', jsonb_build_object('a', jsonb_build_array(repeat('n', 255))));
SELECT idempotency.transition_allowed('long_names', 'a', repeat('n', 255)) AS long_name_ok;
SELECT idempotency.define_state_machine('long_names', jsonb_build_object('a', jsonb_build_array(repeat('n', 256))));
SELECT idempotency.define_state_machine('long_names', jsonb_build_object(repeat('é', 128), '[]'));
SELECT name FROM idempotency.state_machines ORDER BY name;

-- a definition written around define_state_machine (a superuser's INSERT)
-- is checked when a backend loads it: a clear error, never an allocation
-- failure, for every role that reads it
INSERT INTO idempotency.state_machines VALUES ('smuggled', machine(10001, 1), '{s1}', now());
SELECT idempotency.transition_allowed('smuggled', 's1', 's2');
CREATE ROLE regress_reader;
SET ROLE regress_reader;
SELECT idempotency.transition_allowed('smuggled', 's1', 's2');
RESET ROLE;
UPDATE idempotency.state_machines SET transitions = '{"a": [1]}' WHERE name = 'smuggled';
SELECT idempotency.transition_allowed('smuggled', 'a', 'b');
UPDATE idempotency.state_machines SET transitions = '{"a": ["b"]}' WHERE name = 'smuggled';
SELECT idempotency.transition_allowed('smuggled', 'a', 'b');
DELETE FROM idempotency.state_machines WHERE name = 'smuggled';

-- targets: duplicates count once, messages keep the definition's order
SELECT idempotency.define_state_machine('dups', '{"a": ["c", "b", "c"], "b": ["c"]}');
SELECT * FROM idempotency.state_machine_transitions('dups');
CREATE TABLE d (id int PRIMARY KEY, state text NOT NULL);
CREATE TRIGGER d_state BEFORE INSERT OR UPDATE ON d
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('dups', 'state');
INSERT INTO d VALUES (1, 'a');
UPDATE d SET state = 'x' WHERE id = 1;
UPDATE d SET state = 'c' WHERE id = 1;
UPDATE d SET state = 'a' WHERE id = 1;
-- long lists in messages are cut after 50 states
SELECT idempotency.define_state_machine('fan', jsonb_build_object('hub',
	(SELECT jsonb_agg('t' || i ORDER BY i) FROM generate_series(1, 60) AS i), 'other', '[]'::jsonb), '{hub,other}');
CREATE TABLE f (id int PRIMARY KEY, state text NOT NULL);
CREATE TRIGGER f_state BEFORE INSERT OR UPDATE ON f
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('fan', 'state');
INSERT INTO f VALUES (1, 'hub');
UPDATE f SET state = 'other' WHERE id = 1;
SELECT idempotency.define_state_machine('fan', jsonb_build_object('hub',
	(SELECT jsonb_agg('t' || i ORDER BY i) FROM generate_series(1, 60) AS i)), '{t61}');
SELECT idempotency.define_state_machine('wide', (SELECT jsonb_object_agg('s' || i, '[]'::jsonb) FROM generate_series(1, 60) AS i),
	(SELECT array_agg('s' || i) FROM generate_series(2, 60) AS i));
CREATE TABLE w (id int PRIMARY KEY, state text NOT NULL);
CREATE TRIGGER w_state BEFORE INSERT OR UPDATE ON w
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('wide', 'state');
INSERT INTO w VALUES (1, 's1');
-- the value in a "Found" detail is cut too
SELECT idempotency.define_state_machine('bad', jsonb_build_object('a', jsonb_build_array(jsonb_build_array(repeat('x', 300)))));
SELECT idempotency.define_state_machine('bad', jsonb_build_object('a', repeat('x', 300)));
SELECT idempotency.define_state_machine('bad', jsonb_build_object('a', jsonb_build_array((SELECT jsonb_agg(g) FROM generate_series(1, 5000) AS g))));
SELECT idempotency.define_state_machine('bad', jsonb_build_object('a', (SELECT jsonb_object_agg(g, g) FROM generate_series(1, 5000) AS g)));

-- the limit's error in every kind of transaction, each followed by work
-- that commits
CREATE TABLE work (note text);
SELECT idempotency.define_state_machine('too_many_states', machine(10001, 1));
INSERT INTO work VALUES ('after autocommit');
BEGIN;
SELECT idempotency.define_state_machine('too_many_states', machine(10001, 1));
ROLLBACK;
INSERT INTO work VALUES ('after a transaction');
BEGIN;
INSERT INTO work VALUES ('before a savepoint');
SAVEPOINT s;
SELECT idempotency.define_state_machine('too_many_states', machine(10001, 1));
ROLLBACK TO SAVEPOINT s;
INSERT INTO work VALUES ('after a savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.define_state_machine('too_many_states', public.machine(10001, 1));
	EXCEPTION WHEN program_limit_exceeded THEN
		RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
	END;
	INSERT INTO public.work VALUES ('after an exception block');
END $$;
SELECT note FROM work ORDER BY note;
SELECT count(*) AS stored FROM idempotency.state_machines WHERE name = 'too_many_states';

DROP TABLE d, f, w, work;
DROP FUNCTION machine(int, int);
DROP ROLE regress_reader;
SELECT idempotency.drop_state_machine(name) FROM idempotency.state_machines ORDER BY name;
RESET search_path;
