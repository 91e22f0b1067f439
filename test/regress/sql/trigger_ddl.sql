--
-- check_transition, record_transition and version_guard triggers that are
-- defined wrongly are refused by CREATE TRIGGER (an event trigger of the
-- extension), not at the first row written; correct ones are accepted, on
-- plain and partitioned tables.  The row-time checks stay for triggers
-- created while the event trigger was off (test/regress/sql/statemachine.sql,
-- test/regress/sql/inbox.sql).
--
SET search_path = public;

-- the event trigger is part of the extension
SELECT e.evtname, e.evtevent, e.evttags, e.evtenabled, d.deptype
  FROM pg_event_trigger AS e
  JOIN pg_depend AS d ON d.classid = 'pg_event_trigger'::regclass AND d.objid = e.oid
 WHERE d.refclassid = 'pg_extension'::regclass;
SELECT idempotency.check_new_triggers();

SELECT idempotency.define_state_machine('order_status', '{"created": ["paid"], "paid": []}');
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, version int NOT NULL DEFAULT 1,
					 note text, amount numeric);
CREATE VIEW orders_v AS SELECT * FROM orders;

-- check_transition: refused
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'state');
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'ctid');
CREATE TRIGGER t AFTER INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t BEFORE INSERT OR UPDATE ON orders FOR EACH STATEMENT EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t BEFORE INSERT OR DELETE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t BEFORE TRUNCATE ON orders FOR EACH STATEMENT EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t INSTEAD OF UPDATE ON orders_v FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition();
CREATE TRIGGER t BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status');
CREATE TRIGGER t BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status', 'extra');
-- record_transition: refused
CREATE TRIGGER h BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
CREATE TRIGGER h AFTER INSERT OR UPDATE ON orders FOR EACH STATEMENT EXECUTE FUNCTION idempotency.record_transition('status');
CREATE TRIGGER h AFTER UPDATE OR DELETE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
CREATE TRIGGER h AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition();
CREATE TRIGGER h AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status', 'note');
CREATE TRIGGER h AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('state');
CREATE TABLE no_pk (status text);
CREATE TRIGGER h AFTER INSERT ON no_pk FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
-- version_guard: refused
CREATE TRIGGER v BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER v BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER v BEFORE UPDATE OR DELETE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER v AFTER UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER v BEFORE UPDATE ON orders FOR EACH STATEMENT EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER v BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard();
CREATE TRIGGER v BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version', 'note');
CREATE TRIGGER v BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('revision');
CREATE TRIGGER v BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('note');
CREATE TRIGGER v BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('amount');
SELECT count(*) AS triggers_after_refusals FROM pg_trigger WHERE tgrelid IN ('orders'::regclass, 'no_pk'::regclass, 'orders_v'::regclass);

-- accepted: every correct form
CREATE TRIGGER t1 BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t2 BEFORE UPDATE OF status ON orders FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
	EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER h1 AFTER INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
CREATE CONSTRAINT TRIGGER h2 AFTER UPDATE ON orders DEFERRABLE INITIALLY DEFERRED
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
CREATE TRIGGER v1 BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
-- CREATE OR REPLACE checks the new definition and keeps the old one on error
CREATE OR REPLACE TRIGGER t1 BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
CREATE OR REPLACE TRIGGER t1 BEFORE INSERT OR UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
SELECT tgname, pg_get_triggerdef(oid) LIKE '%order_status%' AS right_machine
  FROM pg_trigger WHERE tgrelid = 'orders'::regclass ORDER BY tgname;
INSERT INTO orders (id, status) VALUES (1, 'created');
UPDATE orders SET status = 'paid' WHERE id = 1;
SELECT id, status, version FROM orders;
DROP TRIGGER t2 ON orders;
DROP TRIGGER h2 ON orders;

-- partitioned tables: checked on the parent; partitions made later get the
-- trigger as well
CREATE TABLE parted (id int, region text, status text NOT NULL, version bigint NOT NULL DEFAULT 1,
					 PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE parted_eu PARTITION OF parted FOR VALUES IN ('eu');
CREATE TRIGGER pt BEFORE INSERT OR UPDATE ON parted FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
CREATE TRIGGER pt BEFORE INSERT OR UPDATE ON parted FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'state');
CREATE TRIGGER pv BEFORE INSERT OR UPDATE ON parted FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TRIGGER pt BEFORE INSERT OR UPDATE ON parted FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER ph AFTER INSERT OR UPDATE ON parted FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
CREATE TRIGGER pv BEFORE UPDATE ON parted FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
CREATE TABLE parted_us PARTITION OF parted FOR VALUES IN ('us');
-- on one partition only
CREATE TRIGGER pt_us BEFORE UPDATE ON parted_us FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'nope');
INSERT INTO parted VALUES (1, 'eu', 'created'), (2, 'us', 'created');
UPDATE parted SET status = 'paid';
SELECT id, region, status, version FROM parted ORDER BY id;
SELECT table_name, row_key, from_state, to_state FROM idempotency.state_history
 WHERE table_name LIKE 'public.parted%' ORDER BY table_name, to_state;
-- a partitioned table without a primary key cannot have history
CREATE TABLE parted_no_pk (id int, status text) PARTITION BY RANGE (id);
CREATE TRIGGER ph AFTER INSERT ON parted_no_pk FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');

-- our functions are recognised by OID, not by name: a function of the same
-- name elsewhere is someone else's and is not checked
CREATE FUNCTION public.check_transition() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER namesake AFTER DELETE ON orders FOR EACH STATEMENT EXECUTE FUNCTION public.check_transition();
DROP TRIGGER namesake ON orders;
DROP FUNCTION public.check_transition();

-- a table owner who is not a superuser gets the same checks
CREATE ROLE regress_trigger_owner;
GRANT CREATE ON SCHEMA public TO regress_trigger_owner;
SET ROLE regress_trigger_owner;
CREATE TABLE owned (id int PRIMARY KEY, status text NOT NULL);
CREATE TRIGGER o BEFORE INSERT ON owned FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
CREATE TRIGGER o BEFORE INSERT ON owned FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
INSERT INTO owned VALUES (1, 'created');
DROP TABLE owned;
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_trigger_owner;
DROP ROLE regress_trigger_owner;

-- pg_dump's scripts turn check_function_bodies off: a restore may create a
-- trigger before the machine's row is back, so nothing is checked then; the
-- trigger still checks itself when it fires
SET check_function_bodies = off;
CREATE TRIGGER restored BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('not_yet_restored', 'status');
RESET check_function_bodies;
UPDATE orders SET status = 'created' WHERE id = 1;
DROP TRIGGER restored ON orders;

-- the refusal in every kind of transaction, each followed by work that
-- commits
CREATE TABLE work (note text);
CREATE TRIGGER t9 BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
INSERT INTO work VALUES ('after autocommit');
BEGIN;
CREATE TRIGGER t9 BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
ROLLBACK;
INSERT INTO work VALUES ('after a transaction');
BEGIN;
INSERT INTO work VALUES ('before a savepoint');
SAVEPOINT s;
CREATE TRIGGER t9 BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
ROLLBACK TO SAVEPOINT s;
INSERT INTO work VALUES ('after a savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		CREATE TRIGGER t9 BEFORE INSERT ON public.orders FOR EACH ROW
			EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
	EXCEPTION WHEN undefined_object THEN
		RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
	END;
	INSERT INTO public.work VALUES ('after an exception block');
END $$;
SELECT note FROM work ORDER BY note;
SELECT count(*) AS t9 FROM pg_trigger WHERE tgname = 't9';

DROP TABLE orders, no_pk, parted, parted_no_pk, work CASCADE;
DELETE FROM idempotency.state_history;
SELECT idempotency.drop_state_machine('order_status');
RESET search_path;
