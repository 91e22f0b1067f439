--
-- The version guard (src/version_guard.c).  Concurrency is in
-- test/isolation/specs/version_guard_race.spec; MERGE and partitions in
-- test/regress/sql/trigger_paths.sql.
--
SET search_path = public;

-- the version guard
CREATE TABLE accounts (id int PRIMARY KEY, balance int, version int NOT NULL DEFAULT 1);
CREATE TRIGGER accounts_version BEFORE UPDATE ON accounts
	FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO accounts VALUES (1, 100, 1);
UPDATE accounts SET balance = 90, version = 2 WHERE id = 1;   -- the careful writer
UPDATE accounts SET balance = 80 WHERE id = 1;                -- forgot to bump: bumped
SELECT * FROM accounts;
UPDATE accounts SET balance = 70, version = 3 WHERE id = 1;   -- stale: read at 2, row is at 3
UPDATE accounts SET balance = 70, version = 3 WHERE id = 1 AND version = 2;   -- the usual guard: 0 rows
UPDATE accounts SET balance = 70, version = 9 WHERE id = 1;
UPDATE accounts SET balance = 70, version = NULL WHERE id = 1;
DO $$
BEGIN
	UPDATE public.accounts SET version = 1 WHERE id = 1;
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'caught SQLSTATE %', SQLSTATE;
END $$;
SELECT * FROM accounts;
-- bigint and smallint columns; a multi-row update bumps each row
CREATE TABLE ledger (id int PRIMARY KEY, v bigint NOT NULL, w smallint NOT NULL DEFAULT 32766);
CREATE TRIGGER ledger_v BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('v');
CREATE TRIGGER ledger_w BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('w');
INSERT INTO ledger VALUES (1, 9000000000), (2, 5);
UPDATE ledger SET id = id;
SELECT * FROM ledger ORDER BY id;
UPDATE ledger SET id = id;
-- misuse: refused when the trigger is created (test/regress/sql/trigger_ddl.sql) ...
CREATE TABLE wrong (id int PRIMARY KEY, version text);
CREATE TRIGGER wrong_type BEFORE UPDATE ON wrong FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
-- ... and at the first row if it was created while that check was off
ALTER EVENT TRIGGER idempotency_check_new_triggers DISABLE;
CREATE TRIGGER wrong_type BEFORE UPDATE ON wrong FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO wrong VALUES (1, 'a');
UPDATE wrong SET id = 2;
DROP TRIGGER wrong_type ON wrong;
CREATE TRIGGER wrong_event BEFORE INSERT ON wrong FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO wrong VALUES (3, 'a');
DROP TRIGGER wrong_event ON wrong;
CREATE TRIGGER wrong_column BEFORE UPDATE ON wrong FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('nope');
UPDATE wrong SET id = 2;
ALTER EVENT TRIGGER idempotency_check_new_triggers ENABLE;
DROP TABLE wrong;

DROP TABLE accounts, ledger;
RESET search_path;
