--
-- Records belong to a role name (doc/operations.md, "Security"): what DROP ROLE,
-- creating a role again under the same name and ALTER ROLE ... RENAME do to
-- them, and the administrator's forget_role() and rename_owner().
--
SET search_path = public;

CREATE ROLE regress_carol;
CREATE ROLE regress_dave;
SELECT idempotency.grant_usage('regress_carol');
SELECT idempotency.grant_usage('regress_dave');

-- what a role owns: records, inbox entries, tokens
CREATE VIEW owned AS
	SELECT 'registry' AS tab, owner, scope || '/' || key AS what FROM idempotency.registry
	UNION ALL SELECT 'inbox', owner, consumer || '/' || message_id FROM idempotency.inbox
	UNION ALL SELECT 'tokens', owner, scope || '/' || left(token::text, 3) FROM idempotency.tokens;

SET ROLE regress_carol;
SELECT outcome FROM idempotency.idempotent_begin('order-1', 'pay', external => true);
SELECT idempotency.idempotent_finish('order-1', '{"charged": 10}', 'pay', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-1' AND r.scope = 'pay'));
SELECT idempotency.inbox_receive('billing', 'msg-1');
SELECT idempotency.issue_token('checkout') IS NOT NULL AS issued;
RESET ROLE;
SELECT * FROM owned ORDER BY 1, 2, 3;

-- DROP ROLE leaves the records under the name
DROP OWNED BY regress_carol;
DROP ROLE regress_carol;
SELECT * FROM owned ORDER BY 1, 2, 3;

-- a role created later under the same name inherits them: it replays the
-- dropped role's response and its inbox has seen msg-1
CREATE ROLE regress_carol;
SELECT idempotency.grant_usage('regress_carol');
SET ROLE regress_carol;
SELECT outcome, response FROM idempotency.idempotent_begin('order-1', 'pay', external => true);
SELECT idempotency.inbox_receive('billing', 'msg-1') AS first_time;
SELECT count(*) AS tokens FROM idempotency.my_tokens;
RESET ROLE;

-- forget_role deletes all of them, in this database, and says how many
SELECT idempotency.forget_role('regress_carol');
SELECT * FROM owned ORDER BY 1, 2, 3;
SET ROLE regress_carol;
SELECT outcome FROM idempotency.idempotent_begin('order-1', 'pay', external => true);
SELECT idempotency.idempotent_abandon('order-1', 'pay', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-1' AND r.scope = 'pay'));
RESET ROLE;
SELECT idempotency.forget_role('regress_never_existed');

-- ALTER ROLE ... RENAME: the records and the standing of an application
-- role stay under the old name, so the renamed role is refused (IK008)
-- rather than working on records of its own, and a new role given the old
-- name sees them
SET ROLE regress_dave;
SELECT outcome FROM idempotency.idempotent_begin('order-2', 'pay', external => true);
SELECT idempotency.idempotent_finish('order-2', '{"charged": 20}', 'pay', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-2' AND r.scope = 'pay'));
SELECT outcome FROM idempotency.idempotent_begin('order-3', 'pay', external => true);   -- a live claim
SELECT idempotency.inbox_receive('billing', 'msg-2');
SELECT idempotency.issue_token('checkout') IS NOT NULL AS issued;
RESET ROLE;
ALTER ROLE regress_dave RENAME TO regress_dave_renamed;
SET ROLE regress_dave_renamed;
SELECT count(*) AS records_seen FROM idempotency.my_records;
RESET ROLE;
CREATE ROLE regress_dave;
SELECT idempotency.grant_usage('regress_dave');
SET ROLE regress_dave;
SELECT key, status FROM idempotency.my_records ORDER BY key;
RESET ROLE;
DROP OWNED BY regress_dave;
DROP ROLE regress_dave;

-- rename_owner moves them all to the new name, claims included, and with
-- them the standing of an application role
SELECT idempotency.rename_owner('regress_dave', 'regress_dave_renamed');
SELECT * FROM owned ORDER BY 1, 2, 3;
SET ROLE regress_dave_renamed;
SELECT outcome, response FROM idempotency.idempotent_begin('order-2', 'pay', external => true);
SELECT idempotency.idempotent_finish('order-3', '{"charged": 30}', 'pay', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'order-3' AND r.scope = 'pay'));
SELECT idempotency.inbox_receive('billing', 'msg-2') AS first_time;
SELECT key, status, response FROM idempotency.my_records ORDER BY key;
RESET ROLE;
-- the same name, or a name with nothing: nothing moves
SELECT idempotency.rename_owner('regress_dave_renamed', 'regress_dave_renamed');
SELECT idempotency.rename_owner('regress_dave', 'regress_dave_renamed');

-- refused, moving nothing, when the new name already holds the same key
SET ROLE regress_carol;
SELECT outcome FROM idempotency.idempotent_begin('order-2', 'pay', external => true);
SELECT idempotency.inbox_receive('billing', 'msg-9');
RESET ROLE;
SELECT idempotency.rename_owner('regress_dave_renamed', 'regress_carol');
-- an inbox entry or a token that both names hold
SELECT idempotency.forget_role('regress_carol');
SET ROLE regress_carol;
SELECT idempotency.inbox_receive('billing', 'msg-2');
RESET ROLE;
SELECT idempotency.rename_owner('regress_dave_renamed', 'regress_carol');
SELECT idempotency.forget_role('regress_carol');
INSERT INTO idempotency.tokens (owner, scope, token, issued_at, expires_at)
	SELECT o, 'checkout', 'tk_00000000000000000000000000000001', now(), now() + interval '1 hour'
	  FROM unnest(ARRAY['regress_dave_renamed', 'regress_carol']) AS o;
SELECT idempotency.rename_owner('regress_dave_renamed', 'regress_carol');
SELECT * FROM owned ORDER BY 1, 2, 3;

-- the same refusal in a transaction, under a savepoint and in a PL/pgSQL
-- EXCEPTION block; each time the work that follows commits
BEGIN;
SELECT idempotency.rename_owner('regress_dave_renamed', 'regress_carol');
ROLLBACK;
BEGIN;
SAVEPOINT s;
SELECT idempotency.rename_owner('regress_dave_renamed', 'regress_carol');
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.forget_role('regress_carol');
COMMIT;
DO $$
BEGIN
	PERFORM idempotency.rename_owner('regress_dave_renamed', 'regress_dave');
	PERFORM idempotency.rename_owner('regress_dave', 'regress_dave_renamed');
	INSERT INTO idempotency.tokens (owner, scope, token, issued_at, expires_at)
		VALUES ('regress_carol', 'checkout', 'tk_00000000000000000000000000000001', now(), now() + interval '1 hour');
	BEGIN
		PERFORM idempotency.rename_owner('regress_dave_renamed', 'regress_carol');
	EXCEPTION WHEN unique_violation THEN
		RAISE NOTICE 'refused: %', SQLERRM;
	END;
	PERFORM idempotency.forget_role('regress_carol');
END
$$;
SELECT * FROM owned ORDER BY 1, 2, 3;

-- bad arguments
SELECT idempotency.forget_role(NULL);
SELECT idempotency.forget_role('');
SELECT idempotency.rename_owner(NULL, 'x');
SELECT idempotency.rename_owner('x', NULL);
SELECT idempotency.rename_owner('x', '');
SELECT idempotency.rename_owner('x', repeat('r', 64));

-- administrators only: revoked from PUBLIC, not part of grant_usage
SET ROLE regress_dave_renamed;
SELECT idempotency.forget_role('regress_carol');
SELECT idempotency.rename_owner('regress_carol', 'regress_dave_renamed');
RESET ROLE;

SELECT idempotency.forget_role('regress_dave_renamed');
DROP VIEW owned;
DROP OWNED BY regress_carol, regress_dave_renamed;
DROP ROLE regress_carol, regress_dave_renamed;
RESET search_path;
