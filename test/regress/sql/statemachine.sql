--
-- State machines: definitions, the check_transition trigger, history.
-- Concurrency is in test/isolation/specs/transition_race.spec.
--
SET search_path = public;

-- the seeds' order machine
SELECT idempotency.define_state_machine('order_status', '{
	"created":   ["paying", "cancelled"],
	"paying":    ["paid", "cancelled"],
	"paid":      ["refunding"],
	"refunding": ["refunded"]
}');
SELECT * FROM idempotency.state_machine_transitions('order_status');
SELECT name, initial FROM idempotency.state_machines;

-- transition_allowed for every pair: t = allowed, s = staying (allowed), . = refused
WITH s(st, ord) AS (VALUES ('created', 1), ('paying', 2), ('paid', 3), ('refunding', 4), ('refunded', 5), ('cancelled', 6))
SELECT f.st AS "from \ to",
	   string_agg(CASE WHEN f.st = t.st THEN 's' WHEN idempotency.transition_allowed('order_status', f.st, t.st) THEN 't' ELSE '.' END,
				  ' ' ORDER BY t.ord) AS "cr pg pd rg rd ca"
  FROM s f, s t GROUP BY f.st, f.ord ORDER BY f.ord;
SELECT idempotency.transition_allowed('order_status', 'paid', 'nonsense') AS unknown_to,
	   idempotency.transition_allowed('order_status', 'nonsense', 'nonsense') AS unknown_both;
SELECT idempotency.transition_allowed('no_such_machine', 'a', 'b');
SELECT * FROM idempotency.state_machine_transitions('no_such_machine');

-- malformed definitions
SELECT idempotency.define_state_machine('bad', '["created", "paid"]');
SELECT idempotency.define_state_machine('bad', '{}');
SELECT idempotency.define_state_machine('bad', '{"created": "paid"}');
SELECT idempotency.define_state_machine('bad', '{"created": [1]}');
SELECT idempotency.define_state_machine('bad', '{"created": [""]}');
SELECT idempotency.define_state_machine('bad', '{"": ["paid"]}');
SELECT idempotency.define_state_machine('bad', '{"a": ["b"], "b": ["a"]}');
SELECT idempotency.define_state_machine('bad', '{"a": ["b"]}', '{c}');
SELECT idempotency.define_state_machine('bad', '{"a": ["b"]}', '{}');
SELECT idempotency.define_state_machine('bad', '{"a": ["b"]}', '{a,NULL}');
SELECT idempotency.define_state_machine('', '{"a": ["b"]}');
SELECT idempotency.define_state_machine(NULL, '{"a": ["b"]}');
SELECT idempotency.define_state_machine(repeat('m', 64), '{"a": ["b"]}');
SELECT idempotency.define_state_machine('bad', NULL);
SELECT count(*) AS stored_bad FROM idempotency.state_machines WHERE name = 'bad';
-- a cycle is fine once the initial state is named
SELECT idempotency.define_state_machine('cycle', '{"a": ["b"], "b": ["a"]}', '{a}');

-- the trigger on a text column
CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL DEFAULT 'created', note text);
CREATE TRIGGER orders_status BEFORE INSERT OR UPDATE ON orders
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');

INSERT INTO orders (id) VALUES (1);
INSERT INTO orders VALUES (2, 'paid');
INSERT INTO orders VALUES (3, 'nonsense');
INSERT INTO orders VALUES (4, NULL);
-- the happy path, and the repeat at every step
UPDATE orders SET status = 'paying' WHERE id = 1;
UPDATE orders SET status = 'paying' WHERE id = 1;
UPDATE orders SET status = 'paid' WHERE id = 1;
UPDATE orders SET status = 'paid', note = 'callback retried' WHERE id = 1;
-- a paid order cannot be paid again
UPDATE orders SET status = 'paying' WHERE id = 1;
-- the error names its SQLSTATE (an HTTP layer answers 409) and the column
DO $$
DECLARE
	state text; msg text; detail text; sch text; tab text; col text;
BEGIN
	UPDATE public.orders SET status = 'cancelled' WHERE id = 1;
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL,
		sch = SCHEMA_NAME, tab = TABLE_NAME, col = COLUMN_NAME;
	RAISE NOTICE '% | % | % | %.%.%', state, msg, detail, sch, tab, col;
END $$;
UPDATE orders SET status = 'refunding' WHERE id = 1;
UPDATE orders SET status = 'refunded' WHERE id = 1;
UPDATE orders SET status = 'created' WHERE id = 1;
UPDATE orders SET status = 'nonsense' WHERE id = 1;
UPDATE orders SET status = NULL WHERE id = 1;
SELECT * FROM orders ORDER BY id;

-- every pair from every state, through the trigger: the same matrix as above
CREATE FUNCTION try_move(from_state text, to_state text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	-- put a row into from_state behind the trigger's back, then move it
	ALTER TABLE orders DISABLE TRIGGER orders_status;
	DELETE FROM orders WHERE id = 100;
	INSERT INTO orders VALUES (100, from_state);
	ALTER TABLE orders ENABLE TRIGGER orders_status;
	BEGIN
		UPDATE orders SET status = to_state WHERE id = 100;
		RETURN CASE WHEN from_state = to_state THEN 's' ELSE 't' END;
	EXCEPTION WHEN SQLSTATE 'IS001' THEN
		RETURN '.';
	END;
END $$;
WITH s(st, ord) AS (VALUES ('created', 1), ('paying', 2), ('paid', 3), ('refunding', 4), ('refunded', 5), ('cancelled', 6))
SELECT f.st AS "from \ to", string_agg(try_move(f.st, t.st), ' ' ORDER BY t.ord) AS "cr pg pd rg rd ca"
  FROM s f, s t GROUP BY f.st, f.ord ORDER BY f.ord;
DELETE FROM orders WHERE id = 100;

-- multi-row UPDATE: all rows checked, all or nothing
INSERT INTO orders (id) SELECT g FROM generate_series(10, 14) AS g;
UPDATE orders SET status = 'paying' WHERE id BETWEEN 10 AND 14;
UPDATE orders SET status = 'paid' WHERE id IN (10, 11);
UPDATE orders SET status = 'cancelled' WHERE id BETWEEN 10 AND 14;
SELECT id, status FROM orders WHERE id BETWEEN 10 AND 14 ORDER BY id;
UPDATE orders SET status = 'cancelled' WHERE id BETWEEN 12 AND 14;
SELECT id, status FROM orders WHERE id BETWEEN 10 AND 14 ORDER BY id;

-- COPY goes through the trigger too
COPY orders (id, status) FROM stdin;
20	created
\.
COPY orders (id, status) FROM stdin;
21	paid
\.
SELECT id, status FROM orders WHERE id >= 20 ORDER BY id;

-- an enum column and a varchar column
CREATE TYPE payment_state AS ENUM ('created', 'paying', 'paid', 'refunding', 'refunded', 'cancelled');
CREATE TABLE payments (id int PRIMARY KEY, state payment_state NOT NULL);
CREATE TRIGGER payments_state BEFORE INSERT OR UPDATE ON payments
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'state');
INSERT INTO payments VALUES (1, 'created'), (2, 'created');
UPDATE payments SET state = 'paying';
UPDATE payments SET state = 'paying';
UPDATE payments SET state = 'refunded' WHERE id = 1;
UPDATE payments SET state = 'paid' WHERE id = 1;
SELECT * FROM payments ORDER BY id;
CREATE TABLE shipments (id int PRIMARY KEY, status varchar(20));
CREATE TRIGGER shipments_status BEFORE INSERT OR UPDATE ON shipments
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
INSERT INTO shipments VALUES (1, 'created');
UPDATE shipments SET status = 'paid';
UPDATE shipments SET status = 'cancelled';
-- any type with a text output works, through its output function
CREATE TABLE coded (id int PRIMARY KEY, status char(9));
CREATE TRIGGER coded_status BEFORE INSERT OR UPDATE ON coded
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
INSERT INTO coded VALUES (1, 'cancelled');
INSERT INTO coded VALUES (2, 'created');

-- a partitioned table: the trigger is cloned to every partition
CREATE TABLE orders_p (id int, region text, status text NOT NULL, PRIMARY KEY (id, region)) PARTITION BY LIST (region);
CREATE TABLE orders_p_eu PARTITION OF orders_p FOR VALUES IN ('eu');
CREATE TRIGGER orders_p_status BEFORE INSERT OR UPDATE ON orders_p
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TABLE orders_p_us PARTITION OF orders_p FOR VALUES IN ('us');
INSERT INTO orders_p VALUES (1, 'eu', 'created'), (2, 'us', 'created');
INSERT INTO orders_p VALUES (3, 'us', 'paid');
UPDATE orders_p SET status = 'paying';
UPDATE orders_p SET status = 'refunding' WHERE region = 'us';
UPDATE orders_p_us SET status = 'refunding';
SELECT * FROM orders_p ORDER BY id;

-- misuse: a trigger defined wrongly is refused when it is created
-- (test/regress/sql/trigger_ddl.sql has every case) ...
CREATE TABLE misuse (id int PRIMARY KEY, status text);
CREATE TRIGGER t_after AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
CREATE TRIGGER t_machine BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
-- ... and at its first row if it was created while that check was off
ALTER EVENT TRIGGER idempotency_check_new_triggers DISABLE;
CREATE TRIGGER t_after AFTER INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
INSERT INTO misuse VALUES (1, 'created');
DROP TRIGGER t_after ON misuse;
CREATE TRIGGER t_stmt BEFORE INSERT ON misuse FOR EACH STATEMENT EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
INSERT INTO misuse VALUES (1, 'created');
DROP TRIGGER t_stmt ON misuse;
CREATE TRIGGER t_delete BEFORE DELETE ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'status');
INSERT INTO misuse VALUES (1, 'created');
DELETE FROM misuse;
DROP TRIGGER t_delete ON misuse;
CREATE TRIGGER t_args BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status');
INSERT INTO misuse VALUES (2, 'created');
DROP TRIGGER t_args ON misuse;
CREATE TRIGGER t_column BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('order_status', 'state');
INSERT INTO misuse VALUES (2, 'created');
DROP TRIGGER t_column ON misuse;
CREATE TRIGGER t_machine BEFORE INSERT ON misuse FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('no_such_machine', 'status');
INSERT INTO misuse VALUES (2, 'created');
DROP TRIGGER t_machine ON misuse;
ALTER EVENT TRIGGER idempotency_check_new_triggers ENABLE;
SELECT idempotency.check_transition();
DROP TABLE misuse;

-- a redefinition takes effect at once: allow paid -> cancelled
UPDATE orders SET status = 'cancelled' WHERE id = 11;
SELECT idempotency.define_state_machine('order_status', '{
	"created":   ["paying", "cancelled"],
	"paying":    ["paid", "cancelled"],
	"paid":      ["refunding", "cancelled"],
	"refunding": ["refunded"]
}');
UPDATE orders SET status = 'cancelled' WHERE id = 11;
-- a redefinition inside a transaction applies there at once, and a
-- rollback puts the old one back
BEGIN;
SELECT idempotency.define_state_machine('order_status', '{"created": ["paid"]}');
UPDATE orders SET status = 'paid' WHERE id = 20;
ROLLBACK;
UPDATE orders SET status = 'paid' WHERE id = 20;
SELECT id, status FROM orders WHERE id IN (11, 20) ORDER BY id;

-- drop_state_machine refuses while a trigger uses the machine
SELECT idempotency.drop_state_machine('order_status');
SELECT idempotency.drop_state_machine('no_such_machine');
SELECT idempotency.drop_state_machine('cycle');
SELECT name FROM idempotency.state_machines ORDER BY name;

-- who may change definitions, and who may bypass the trigger: nobody who
-- can only UPDATE the table
CREATE ROLE regress_clerk;
GRANT SELECT, INSERT, UPDATE ON orders TO regress_clerk;
SET ROLE regress_clerk;
UPDATE orders SET status = 'paying' WHERE id = 12;
SELECT idempotency.define_state_machine('order_status', '{"cancelled": ["paid"]}');
INSERT INTO idempotency.state_machines VALUES ('x', '{}', '{}', now());
UPDATE idempotency.state_machines SET transitions = '{"cancelled": ["paid"]}';
SET session_replication_role = replica;
ALTER TABLE orders DISABLE TRIGGER orders_status;
SELECT count(*) > 0 AS can_read_definitions FROM idempotency.state_machines;
RESET ROLE;

-- history: every state change, readable by those who may read the table
CREATE TRIGGER orders_history AFTER INSERT OR UPDATE ON orders
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO orders (id) VALUES (30);
UPDATE orders SET status = 'paying' WHERE id = 30;
UPDATE orders SET note = 'no state change' WHERE id = 30;
UPDATE orders SET status = 'paid' WHERE id = 30;
SELECT table_name, row_key, from_state, to_state, role, xid IS NOT NULL AS has_xid,
	   expires_at > changed_at + interval '29 days' AS kept_30_days
  FROM idempotency.state_history ORDER BY changed_at, to_state;
CREATE ROLE regress_auditor;
SET ROLE regress_auditor;
SELECT count(*) AS visible_without_grant FROM idempotency.state_history;
INSERT INTO idempotency.state_history VALUES ('x', '{}', NULL, 'y', now(), '1', 'me', now());
RESET ROLE;
GRANT SELECT ON orders TO regress_auditor;
SET ROLE regress_auditor;
SELECT count(*) AS visible_with_grant FROM idempotency.state_history;
RESET ROLE;
-- history rows expire like keys: cleanup() removes them
UPDATE idempotency.state_history SET expires_at = now() - interval '1 second';
SELECT idempotency.cleanup();
SELECT count(*) AS history_left FROM idempotency.state_history;
-- a table without a primary key cannot have history: refused when the
-- trigger is created, and at the first row if that check was off
CREATE TABLE no_pk (status text);
CREATE TRIGGER no_pk_history AFTER INSERT ON no_pk FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
ALTER EVENT TRIGGER idempotency_check_new_triggers DISABLE;
CREATE TRIGGER no_pk_history AFTER INSERT ON no_pk FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
ALTER EVENT TRIGGER idempotency_check_new_triggers ENABLE;
INSERT INTO no_pk VALUES ('created');
DROP TABLE no_pk;

DROP TABLE orders, payments, shipments, coded, orders_p;
DROP TYPE payment_state;
DROP FUNCTION try_move(text, text);
SELECT idempotency.drop_state_machine('order_status');
DROP ROLE regress_clerk, regress_auditor;
RESET search_path;
