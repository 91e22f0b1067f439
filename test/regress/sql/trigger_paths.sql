--
-- The checker, the version guard and the history on every write path:
-- generated columns, rows moved between partitions, MERGE, and keys that
-- JSON cannot hold as numbers.
--
SET search_path = public;
SELECT idempotency.define_state_machine('paths',
	'{"created": ["paying", "cancelled"], "paying": ["paid", "created"], "paid": ["refunded"], "refunded": [], "cancelled": []}',
	ARRAY['created']);

--
-- A generated column as the state or version column: a BEFORE trigger sees
-- it before it is computed, so CREATE TRIGGER refuses it, and so does the
-- first row of a trigger created while nothing was checked.
--
CREATE TABLE g (id int PRIMARY KEY, raw text NOT NULL,
				status text GENERATED ALWAYS AS (raw) STORED,
				raw_version int NOT NULL DEFAULT 1,
				version int GENERATED ALWAYS AS (raw_version) STORED);
CREATE TRIGGER c BEFORE UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
CREATE TRIGGER v BEFORE UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
-- an AFTER trigger sees the computed value: record_transition may use it
CREATE TRIGGER h AFTER INSERT OR UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
SET check_function_bodies = off;
CREATE TRIGGER c BEFORE UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
CREATE TRIGGER v BEFORE UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
RESET check_function_bodies;
INSERT INTO g (id, raw) VALUES (1, 'paid');
UPDATE g SET raw = 'created' WHERE id = 1;
DROP TRIGGER c ON g;
UPDATE g SET raw = 'created' WHERE id = 1;
DROP TRIGGER v ON g;
UPDATE g SET raw = 'created' WHERE id = 1;
SELECT id, raw, status FROM g;
SELECT row_key, from_state, to_state FROM idempotency.state_history
 WHERE table_name = 'public.g' ORDER BY changed_at, to_state;
-- refused in a transaction, under a savepoint and in an exception block
BEGIN;
CREATE TRIGGER c BEFORE UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
ROLLBACK;
BEGIN;
SAVEPOINT s;
CREATE TRIGGER c BEFORE UPDATE ON g FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS triggers FROM pg_trigger WHERE tgrelid = 'g'::regclass;
COMMIT;
DO $$
BEGIN
	CREATE TRIGGER c BEFORE UPDATE ON public.g FOR EACH ROW
		EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
EXCEPTION WHEN invalid_column_reference THEN
	RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
END $$;
DROP TABLE g;
DELETE FROM idempotency.state_history;

--
-- Keys that JSON cannot hold as numbers: NaN and the infinities are
-- recorded as strings, so that row_key is valid JSON (and a restore of the
-- history reads it back); money, whose text is not a number, likewise.
--
CREATE TABLE nk (id numeric PRIMARY KEY, status text NOT NULL);
CREATE TRIGGER h AFTER INSERT OR UPDATE ON nk FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO nk VALUES ('NaN', 'created'), ('Infinity', 'created'), ('-Infinity', 'created'), (1.50, 'created');
CREATE DOMAIN money_key AS money;
CREATE TABLE mk (id money_key PRIMARY KEY, status text NOT NULL);
CREATE TRIGGER h AFTER INSERT ON mk FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO mk VALUES (1.25, 'created');
SELECT table_name, row_key, row_key::text::jsonb = row_key AS reads_back,
	   jsonb_typeof(row_key -> 'id') AS id_type
  FROM idempotency.state_history
 WHERE table_name = ANY (ARRAY['public.nk', 'public.mk'])
 ORDER BY table_name, row_key::text;
DROP TABLE nk, mk;
DROP DOMAIN money_key;
DELETE FROM idempotency.state_history;

--
-- A definition written under session_replication_role = replica (as a
-- subscription's apply worker writes it) still reaches the caches: the
-- triggers on state_machines are row triggers and fire ALWAYS.
--
SELECT t.tgname, t.tgenabled, t.tgtype & 1 = 1 AS for_each_row
  FROM pg_trigger AS t
 WHERE t.tgrelid = 'idempotency.state_machines'::regclass
 ORDER BY t.tgname;
SELECT idempotency.transition_allowed('paths', 'paying', 'created') AS before_change;
SET session_replication_role = replica;
UPDATE idempotency.state_machines
   SET transitions = transitions || '{"paying": ["paid"]}'
 WHERE name = 'paths';
SELECT idempotency.transition_allowed('paths', 'paying', 'created') AS after_change;
RESET session_replication_role;

--
-- History is shown only to roles that see every row of the table it
-- describes, and only while the table is the one that was written.
--
CREATE ROLE regress_tenant_a;
CREATE ROLE regress_tenant_b;
CREATE TABLE t_orders (id int PRIMARY KEY, tenant text NOT NULL DEFAULT current_user,
					   status text NOT NULL);
CREATE TRIGGER h AFTER INSERT OR UPDATE ON t_orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
ALTER TABLE t_orders ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON t_orders USING (tenant = current_user);
GRANT SELECT, INSERT, UPDATE ON t_orders TO regress_tenant_a, regress_tenant_b;
SET ROLE regress_tenant_a;
INSERT INTO t_orders (id, status) VALUES (1, 'created');
UPDATE t_orders SET status = 'paying' WHERE id = 1;
RESET ROLE;
-- the other tenant sees none of the orders, and none of their history
SET ROLE regress_tenant_b;
SELECT count(*) AS orders_seen FROM t_orders;
SELECT count(*) AS history_seen FROM idempotency.state_history WHERE table_name = 'public.t_orders';
RESET ROLE;
-- nor does the tenant itself: a history row cannot tell whose row it was
SET ROLE regress_tenant_a;
SELECT count(*) AS orders_seen FROM t_orders;
SELECT count(*) AS history_seen FROM idempotency.state_history WHERE table_name = 'public.t_orders';
RESET ROLE;
-- a role that bypasses the table's row-level security reads it all
ALTER ROLE regress_tenant_b BYPASSRLS;
SET ROLE regress_tenant_b;
SELECT row_key, from_state, to_state, role FROM idempotency.state_history
 WHERE table_name = 'public.t_orders' ORDER BY changed_at, to_state;
RESET ROLE;
-- and with row-level security off, every reader does
ALTER ROLE regress_tenant_b NOBYPASSRLS;
ALTER TABLE t_orders DISABLE ROW LEVEL SECURITY;
SET ROLE regress_tenant_b;
SELECT count(*) AS history_seen FROM idempotency.state_history WHERE table_name = 'public.t_orders';
RESET ROLE;

-- a table dropped and created again under the same name by a role with no
-- grants is another table: the old one's history stays hidden from it
CREATE ROLE regress_newcomer;
GRANT CREATE ON SCHEMA public TO regress_newcomer;
GRANT SELECT ON t_orders TO regress_newcomer;
SET ROLE regress_newcomer;
SELECT count(*) AS history_while_granted FROM idempotency.state_history WHERE table_name = 'public.t_orders';
RESET ROLE;
DROP TABLE t_orders;
SET ROLE regress_newcomer;
CREATE TABLE t_orders (id int PRIMARY KEY, status text NOT NULL);
SELECT count(*) AS history_of_dropped_table FROM idempotency.state_history WHERE table_name = 'public.t_orders';
DROP TABLE t_orders;
RESET ROLE;
-- renamed, the history is hidden until the name is back
CREATE TABLE renamed (id int PRIMARY KEY, status text NOT NULL);
CREATE TRIGGER h AFTER INSERT ON renamed FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO renamed VALUES (1, 'created');
GRANT SELECT ON renamed TO regress_newcomer;
ALTER TABLE renamed RENAME TO renamed_now;
SET ROLE regress_newcomer;
SELECT count(*) AS history_after_rename FROM idempotency.state_history WHERE table_name = 'public.renamed';
CREATE TABLE renamed (id int PRIMARY KEY, status text NOT NULL);
SELECT count(*) AS history_of_namesake FROM idempotency.state_history WHERE table_name = 'public.renamed';
DROP TABLE renamed;
RESET ROLE;
ALTER TABLE renamed_now RENAME TO renamed;
SET ROLE regress_newcomer;
SELECT count(*) AS history_with_name_back FROM idempotency.state_history WHERE table_name = 'public.renamed';
RESET ROLE;
DROP TABLE renamed;
-- a table in a schema the reader may not use: hidden, not an error
CREATE SCHEMA closed;
CREATE TABLE closed.t (id int PRIMARY KEY, status text NOT NULL);
CREATE TRIGGER h AFTER INSERT ON closed.t FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO closed.t VALUES (1, 'created');
SET ROLE regress_newcomer;
SELECT count(*) AS history_in_closed_schema FROM idempotency.state_history;
RESET ROLE;
DROP SCHEMA closed CASCADE;
-- the history itself is still there for the administrator
SELECT table_name, count(*) FROM idempotency.state_history GROUP BY table_name ORDER BY table_name;
DELETE FROM idempotency.state_history;
REVOKE CREATE ON SCHEMA public FROM regress_newcomer;
DROP ROLE regress_tenant_a, regress_tenant_b, regress_newcomer;

--
-- MERGE with UPDATE actions that disagree on the version column: each row
-- is judged by the action it goes through, not by all actions' columns.
--
CREATE TABLE acct (id int PRIMARY KEY, balance int NOT NULL, version int NOT NULL DEFAULT 1);
CREATE TRIGGER v BEFORE UPDATE ON acct FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO acct VALUES (1, 100), (2, 200), (3, 300);
CREATE TABLE moves (id int, amount int, read_version int);
INSERT INTO moves VALUES (1, 10, 1), (2, 20, NULL);
-- row 1 sets the version it read + 1, row 2 leaves the version out
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET balance = a.balance - m.amount, version = m.read_version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - m.amount;
SELECT id, balance, version FROM acct ORDER BY id;
-- the other order of the actions
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.read_version IS NULL THEN
	UPDATE SET balance = a.balance - m.amount
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - m.amount, version = m.read_version + 2;
SELECT id, balance, version FROM acct ORDER BY id;
-- a stale version through the action that sets it is still refused, also
-- when it equals the row's version
UPDATE moves SET read_version = 2 WHERE id = 1;
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET balance = a.balance - m.amount, version = m.read_version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - m.amount;
-- and a plain UPDATE afterwards is judged by its own columns
UPDATE acct SET version = version WHERE id = 2;
UPDATE acct SET balance = 0 WHERE id = 2;
-- DELETE and DO NOTHING actions between them
INSERT INTO moves VALUES (3, 30, NULL);
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.id = 3 THEN DO NOTHING
WHEN MATCHED AND m.id = 2 THEN DELETE
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET version = a.version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - m.amount;
SELECT id, balance, version FROM acct ORDER BY id;
-- from PL/pgSQL, under a savepoint, and the refusal in an exception block
INSERT INTO acct VALUES (2, 200);
CREATE FUNCTION merge_moves() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	MERGE INTO public.acct AS a USING public.moves AS m ON a.id = m.id
	WHEN MATCHED AND m.read_version IS NOT NULL THEN
		UPDATE SET balance = a.balance - m.amount, version = m.read_version + 1
	WHEN MATCHED THEN
		UPDATE SET balance = a.balance - m.amount;
END $$;
UPDATE moves SET read_version = 4 WHERE id = 1;
BEGIN;
SAVEPOINT s;
SELECT merge_moves();
SELECT id, balance, version FROM acct ORDER BY id;
ROLLBACK TO SAVEPOINT s;
COMMIT;
UPDATE moves SET read_version = 3 WHERE id = 1;
DO $$
BEGIN
	PERFORM public.merge_moves();
EXCEPTION WHEN SQLSTATE 'IV001' THEN
	RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
END $$;
SELECT id, balance, version FROM acct ORDER BY id;
-- a function in the action's SET list that runs a statement of its own,
-- and one that fails in an exception block
CREATE FUNCTION fee(amount int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	RETURN amount + (SELECT count(*) FROM public.moves WHERE id < 0);
END $$;
CREATE FUNCTION fee_failing(amount int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		PERFORM 1 / (SELECT count(*) FROM public.moves WHERE id < 0)::int;
	EXCEPTION WHEN division_by_zero THEN
		NULL;
	END;
	RETURN amount;
END $$;
UPDATE moves SET read_version = 4 WHERE id = 1;
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET balance = a.balance - fee(m.amount), version = m.read_version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - fee(m.amount);
SELECT id, balance, version FROM acct ORDER BY id;
UPDATE moves SET read_version = 5 WHERE id = 1;
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET balance = a.balance - fee_failing(m.amount), version = m.read_version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - fee_failing(m.amount);
SELECT id, balance, version FROM acct ORDER BY id;
-- and the stale write through a function is still refused
UPDATE moves SET read_version = 5 WHERE id = 1;
MERGE INTO acct AS a USING moves AS m ON a.id = m.id
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET balance = a.balance - fee(m.amount), version = m.read_version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - fee(m.amount);
DROP FUNCTION fee(int), fee_failing(int);
-- a partitioned target
CREATE TABLE pacct (id int, region text, balance int NOT NULL, version int NOT NULL DEFAULT 1,
					PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE pacct_eu PARTITION OF pacct FOR VALUES IN ('eu');
CREATE TABLE pacct_us PARTITION OF pacct FOR VALUES IN ('us');
CREATE TRIGGER v BEFORE UPDATE ON pacct FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO pacct VALUES (1, 'eu', 100), (2, 'us', 200);
MERGE INTO pacct AS a USING (VALUES (1, 10, 1), (2, 20, NULL)) AS m(id, amount, read_version) ON a.id = m.id
WHEN MATCHED AND m.read_version IS NOT NULL THEN
	UPDATE SET balance = a.balance - m.amount, version = m.read_version + 1
WHEN MATCHED THEN
	UPDATE SET balance = a.balance - m.amount;
SELECT id, region, balance, version FROM pacct ORDER BY id;
DROP TABLE acct, moves, pacct;
DROP FUNCTION merge_moves();

--
-- A row that an UPDATE moves to another partition: the move is the
-- transition the UPDATE checked, not a new row in the destination.
--
CREATE TABLE pm (id int, status text NOT NULL, version int NOT NULL DEFAULT 1,
				 PRIMARY KEY (id, status)) PARTITION BY LIST (status);
CREATE TABLE pm_open PARTITION OF pm FOR VALUES IN ('created', 'paying');
CREATE TABLE pm_done PARTITION OF pm DEFAULT;
CREATE TRIGGER c BEFORE INSERT OR UPDATE ON pm FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
CREATE TRIGGER v BEFORE UPDATE ON pm FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER h AFTER INSERT OR UPDATE ON pm FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO pm (id, status) VALUES (1, 'created'), (2, 'created'), (3, 'created');
UPDATE pm SET status = 'paying';
UPDATE pm SET status = 'paid' WHERE id = 1;
UPDATE pm SET status = 'paid', version = 3 WHERE id = 2;
SELECT tableoid::regclass AS partition, id, status, version FROM pm ORDER BY id;
-- a move the machine does not allow is refused by the UPDATE
UPDATE pm SET status = 'refunded' WHERE id = 3;
-- a new row, even right after a move in the same transaction, must start
-- in an initial state
BEGIN;
UPDATE pm SET status = 'paid' WHERE id = 3;
INSERT INTO pm (id, status) VALUES (4, 'paid');
ROLLBACK;
INSERT INTO pm (id, status) VALUES (4, 'paid');
-- moves under a savepoint, in PL/pgSQL and by MERGE
BEGIN;
SAVEPOINT s;
UPDATE pm SET status = 'paid' WHERE id = 3;
ROLLBACK TO SAVEPOINT s;
DO $$
BEGIN
	UPDATE public.pm SET status = 'paid' WHERE id = 3;
END $$;
COMMIT;
MERGE INTO pm USING (VALUES (1, 'refunded')) AS m(id, status) ON pm.id = m.id
WHEN MATCHED THEN UPDATE SET status = m.status;
SELECT tableoid::regclass AS partition, id, status, version FROM pm ORDER BY id;
-- the history sees a move as the row's arrival in the other partition
SELECT table_name, row_key, from_state, to_state FROM idempotency.state_history
 WHERE row_key @> '{"id": 1}' ORDER BY changed_at, xid, to_state;
-- a row version the UPDATE did not move is no licence for a new row, even
-- in the same statement's function call
CREATE FUNCTION pm_update_then_insert() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	UPDATE public.pm SET version = version + 1 WHERE id = 2;
	INSERT INTO public.pm (id, status) VALUES (5, 'paid');
END $$;
SELECT pm_update_then_insert();
DROP FUNCTION pm_update_then_insert();
-- nor is a row version the partition no longer has
BEGIN;
UPDATE pm SET version = version + 1 WHERE id = 2;
TRUNCATE pm_done;
INSERT INTO pm (id, status) VALUES (5, 'paid');
ROLLBACK;
-- another BEFORE UPDATE trigger in PL/pgSQL after the check does not hide
-- the move
CREATE FUNCTION pm_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.version := NEW.version;
	PERFORM count(*) FROM public.pm;
	RETURN NEW;
END $$;
CREATE TRIGGER z BEFORE UPDATE ON pm FOR EACH ROW EXECUTE FUNCTION pm_touch();
INSERT INTO pm (id, status) VALUES (6, 'created');
UPDATE pm SET status = 'paying' WHERE id = 6;
UPDATE pm SET status = 'paid' WHERE id = 6;
DROP TRIGGER z ON pm;
DROP FUNCTION pm_touch();
SELECT tableoid::regclass AS partition, id, status, version FROM pm ORDER BY id;
-- a row moved by another column keeps its state: still not a new row
CREATE TABLE pr (id int, region text, status text NOT NULL, PRIMARY KEY (id, region))
	PARTITION BY LIST (region);
CREATE TABLE pr_eu PARTITION OF pr FOR VALUES IN ('eu');
CREATE TABLE pr_us PARTITION OF pr FOR VALUES IN ('us');
CREATE TRIGGER c BEFORE INSERT OR UPDATE ON pr FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('paths', 'status');
INSERT INTO pr VALUES (1, 'eu', 'created'), (2, 'eu', 'created');
UPDATE pr SET status = 'paying';
UPDATE pr SET status = 'paid';
UPDATE pr SET region = 'us' WHERE id = 1;
UPDATE pr SET region = 'us', status = 'refunded' WHERE id = 2;
UPDATE pr SET region = 'eu', status = 'created' WHERE id = 2;
SELECT tableoid::regclass AS partition, id, status FROM pr ORDER BY id;
DROP TABLE pm, pr;
DELETE FROM idempotency.state_history;

SELECT idempotency.drop_state_machine('paths');
RESET search_path;
