--
-- Records belong to the application role grant_usage() was given to, not to
-- whichever login carries it (src/owner.c): rotating login roles that are
-- members of one application role share its records, inbox, tokens and key
-- locks; a role that is itself granted keeps its own; a role under two
-- application roles is refused (IK007) in every transaction context.
--
SET search_path = public;

CREATE ROLE regress_api NOLOGIN;
SELECT idempotency.grant_usage('regress_api');
CREATE ROLE "regress_v-app-lease1" LOGIN IN ROLE regress_api;
CREATE ROLE "regress_v-app-lease2" LOGIN IN ROLE regress_api;
CREATE TABLE rotated_charges (key text PRIMARY KEY, amount int);
GRANT INSERT, SELECT ON rotated_charges TO regress_api;

-- the lease that executes and the next lease's retry: a replay, not a second charge
SET ROLE "regress_v-app-lease1";
SELECT idempotency.owner_name();
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('rot-1', 'acct_1', '{"a": 1}');
INSERT INTO rotated_charges VALUES ('rot-1', 1);
SELECT idempotency.idempotent_finish('rot-1', '{"charged": true}', 'acct_1');
COMMIT;
SELECT idempotency.inbox_receive('billing', 'msg-rot');
SELECT idempotency.issue_token('forms') AS token \gset
RESET ROLE;
SET ROLE "regress_v-app-lease2";
SELECT idempotency.owner_name();
SELECT outcome, response FROM idempotency.idempotent_begin('rot-1', 'acct_1', '{"a": 1}');
SELECT key, scope, status FROM idempotency.my_records;
SELECT idempotency.inbox_receive('billing', 'msg-rot');
SELECT idempotency.consume_token(:'token', 'forms');
SELECT count(*) AS tokens FROM idempotency.my_tokens;
RESET ROLE;
SELECT owner, key, status FROM idempotency.registry WHERE key = 'rot-1';
SELECT count(*) AS charges FROM rotated_charges;

-- a claim taken by one lease is finished by the next with its attempt
SET ROLE "regress_v-app-lease1";
SELECT attempt AS rot2 FROM idempotency.idempotent_begin('rot-2', external => true) \gset
RESET ROLE;
SET ROLE "regress_v-app-lease2";
SELECT idempotency.idempotent_finish('rot-2', '"finished by the next lease"', attempt => :rot2);
RESET ROLE;

-- (key locks taken by two leases at once: test/isolation/specs/owner_locks.spec)

-- a role granted the API itself keeps its own records, even inside an
-- application role
CREATE ROLE regress_own_app IN ROLE regress_api;
SELECT idempotency.grant_usage('regress_own_app');
SET ROLE regress_own_app;
SELECT idempotency.owner_name();
SELECT outcome FROM idempotency.idempotent_begin('rot-1', 'acct_1', '{"a": 1}', external => true);
RESET ROLE;

-- a role under two application roles: which one owns its records would be
-- a guess, so it is refused (IK007), in every transaction context
CREATE ROLE regress_api2 NOLOGIN;
SELECT idempotency.grant_usage('regress_api2');
CREATE ROLE regress_both IN ROLE regress_api, regress_api2;
CREATE TABLE after_ik007 (what text);
GRANT INSERT ON after_ik007 TO regress_both;
SET ROLE regress_both;
SELECT outcome FROM idempotency.idempotent_begin('amb-1');
SELECT * FROM idempotency.my_records;
BEGIN;
SELECT idempotency.inbox_receive('billing', 'amb');
ROLLBACK;
BEGIN;
SAVEPOINT a;
SELECT idempotency.try_lock('amb');
ROLLBACK TO SAVEPOINT a;
INSERT INTO after_ik007 VALUES ('savepoint');
COMMIT;
DO $$
BEGIN
	BEGIN
		PERFORM idempotency.idempotent_begin('amb-1');
	EXCEPTION WHEN SQLSTATE 'IK007' THEN
		RAISE NOTICE 'caught %', SQLSTATE;
	END;
	INSERT INTO after_ik007 VALUES ('block');
END $$;
-- SET ROLE to one of them settles it
SET ROLE regress_api2;
SELECT idempotency.owner_name();
RESET ROLE;
SELECT what FROM after_ik007 ORDER BY what;

-- the answer follows grants and memberships at once, in the same session
SET ROLE "regress_v-app-lease1";
SELECT idempotency.owner_name();
RESET ROLE;
GRANT regress_api2 TO "regress_v-app-lease1";
SET ROLE "regress_v-app-lease1";
SELECT idempotency.owner_name();
RESET ROLE;
REVOKE regress_api2 FROM "regress_v-app-lease1";
SET ROLE "regress_v-app-lease1";
SELECT idempotency.owner_name();
RESET ROLE;
-- a superuser stores under its own name
SELECT idempotency.owner_name() = current_user AS superuser_own;

TRUNCATE idempotency.registry, idempotency.inbox, idempotency.tokens;
DROP TABLE rotated_charges, after_ik007;
DROP OWNED BY regress_api, regress_api2, regress_own_app, regress_both,
	"regress_v-app-lease1", "regress_v-app-lease2";
DROP ROLE regress_both, regress_own_app, "regress_v-app-lease1", "regress_v-app-lease2",
	regress_api, regress_api2;
RESET search_path;
