--
-- Every error of every function, in every transaction context.
--
-- Each case below is one statement and the SQLSTATE it must fail with.  The
-- driver at the end runs each case four times:
--   1. in autocommit, then an INSERT that must commit on its own;
--   2. in an explicit transaction that does work first and then ROLLBACK:
--      that work must vanish;
--   3. under a SAVEPOINT: ROLLBACK TO, more work, COMMIT: the work before
--      and after the savepoint must commit;
--   4. inside a PL/pgSQL EXCEPTION block whose own INSERT must roll back,
--      followed by more work in the same function, which must commit;
-- and then one more statement, which must find the session idle, in a
-- transaction of its own.  After all cases the session reconnects and counts
-- what committed: a session left inside a transaction would lose it.
--
-- An error that comes from a statement the extension runs internally (a lock
-- or statement timeout while it waits for a row) must not show that
-- statement in its CONTEXT; the last part shows those errors in full.
--
-- Waits never depend on timing: the rows and locks waited for are held by
-- prepared transactions, which wait forever, so only the timeout ends them.
--
SET search_path = public;

-- what the cases' surrounding work writes
CREATE TABLE ec_log (n int, step text);

-- the cases: a statement, a setting it runs under (SET LOCAL), the SQLSTATE
CREATE TABLE ec_cases (
	n int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name text NOT NULL,
	setting text,
	stmt text NOT NULL,
	expected text NOT NULL
);

CREATE ROLE regress_ec_nobody;
GRANT SELECT ON ec_cases TO regress_ec_nobody;
GRANT SELECT, INSERT ON ec_log TO regress_ec_nobody;

--
-- Fixtures
--
-- a finished record, a live claim, a seen message, tokens
SELECT outcome FROM idempotency.idempotent_begin('ec-done', request => '{"n": 1}', external => true);
SELECT idempotency.idempotent_finish('ec-done', '{"done": true}', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'ec-done' AND r.scope = ''));
SELECT outcome FROM idempotency.idempotent_begin('ec-live', lease => '1 hour', external => true);
SELECT idempotency.inbox_receive('ec', 'seen');
SELECT idempotency.outbox_send('ec', '{}', 'ec', message_id => 'ec-sent');
CREATE TABLE ec_tokens (name text PRIMARY KEY, token idempotency.key);
INSERT INTO ec_tokens SELECT 'held', idempotency.issue_token('ec');

-- state machines and tables with triggers
SELECT idempotency.define_state_machine('ec_order', '{"new": ["done"]}');
SELECT idempotency.define_state_machine('ec_held', '{"a": ["b"]}');
SELECT idempotency.define_state_machine('ec_orphan', '{"a": ["b"]}');
CREATE TABLE ec_orders (id int PRIMARY KEY, status text);
CREATE TRIGGER ec_orders_check BEFORE INSERT OR UPDATE ON ec_orders
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('ec_order', 'status');
CREATE TRIGGER ec_orders_history AFTER INSERT OR UPDATE ON ec_orders
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
INSERT INTO ec_orders VALUES (1, 'new');
UPDATE ec_orders SET status = 'done' WHERE id = 1;
CREATE TABLE ec_accounts (id int PRIMARY KEY, version int NOT NULL);
CREATE TRIGGER ec_accounts_version BEFORE UPDATE ON ec_accounts
	FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO ec_accounts VALUES (1, 1);
CREATE TABLE ec_small (id int PRIMARY KEY, v smallint NOT NULL);
CREATE TRIGGER ec_small_version BEFORE UPDATE ON ec_small
	FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('v');
INSERT INTO ec_small VALUES (1, 32767);

-- triggers that were right when created and that a later change broke
CREATE TABLE ec_orphans (id int PRIMARY KEY, status text);
CREATE TRIGGER ec_orphans_check BEFORE INSERT OR UPDATE ON ec_orphans
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('ec_orphan', 'status');
DELETE FROM idempotency.state_machines WHERE name = 'ec_orphan';
CREATE TABLE ec_nostate (id int PRIMARY KEY, status text);
CREATE TRIGGER ec_nostate_check BEFORE INSERT OR UPDATE ON ec_nostate
	FOR EACH ROW EXECUTE FUNCTION idempotency.check_transition('ec_order', 'status');
CREATE TRIGGER ec_nostate_history AFTER INSERT OR UPDATE ON ec_nostate
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
ALTER TABLE ec_nostate DROP COLUMN status;
CREATE TABLE ec_nohistory (id int PRIMARY KEY, status text);
CREATE TRIGGER ec_nohistory_history AFTER INSERT OR UPDATE ON ec_nohistory
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
ALTER TABLE ec_nohistory DROP COLUMN status;
CREATE TABLE ec_nopk (id int CONSTRAINT ec_nopk_pkey PRIMARY KEY, status text);
CREATE TRIGGER ec_nopk_history AFTER INSERT OR UPDATE ON ec_nopk
	FOR EACH ROW EXECUTE FUNCTION idempotency.record_transition('status');
ALTER TABLE ec_nopk DROP CONSTRAINT ec_nopk_pkey;
CREATE TABLE ec_vtype (id int PRIMARY KEY, version int);
CREATE TRIGGER ec_vtype_version BEFORE UPDATE ON ec_vtype
	FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO ec_vtype VALUES (1, 1);
ALTER TABLE ec_vtype ALTER COLUMN version TYPE text;
CREATE TABLE ec_vcolumn (id int PRIMARY KEY, version int);
CREATE TRIGGER ec_vcolumn_version BEFORE UPDATE ON ec_vcolumn
	FOR EACH ROW EXECUTE FUNCTION idempotency.version_guard('version');
INSERT INTO ec_vcolumn VALUES (1, 1);
ALTER TABLE ec_vcolumn DROP COLUMN version;

-- rows and locks held by prepared transactions, for the timeout cases
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('ec-held', external => true);
PREPARE TRANSACTION 'ec_claim';
BEGIN;
SELECT idempotency.inbox_receive('ec', 'held');
SELECT idempotency.outbox_send('ec', '{}', 'ec-held', message_id => 'ec-held-1');
PREPARE TRANSACTION 'ec_inbox';
BEGIN;
SELECT idempotency.consume_token(token, 'ec') FROM ec_tokens WHERE name = 'held';
PREPARE TRANSACTION 'ec_token';
BEGIN;
SELECT idempotency.lock('ec-held');
PREPARE TRANSACTION 'ec_lock';
BEGIN;
SELECT idempotency.define_state_machine('ec_held', '{"a": ["b", "c"]}');
PREPARE TRANSACTION 'ec_machine';

-- what the extension's tables hold now: no failed call may change it
CREATE TABLE ec_before AS
SELECT 'registry' AS tab, r::text AS content FROM idempotency.registry AS r
UNION ALL SELECT 'inbox', i::text FROM idempotency.inbox AS i
UNION ALL SELECT 'tokens', t::text FROM idempotency.tokens AS t
UNION ALL SELECT 'outbox', o::text FROM idempotency.outbox AS o
UNION ALL SELECT 'state_machines', m::text FROM idempotency.state_machines AS m
UNION ALL SELECT 'state_history', count(*)::text FROM idempotency.state_history
UNION ALL SELECT 'ec_orders', o::text FROM ec_orders AS o
UNION ALL SELECT 'ec_accounts', a::text FROM ec_accounts AS a;

--
-- The cases
--
\set lock_timeout 'lock_timeout = ''10ms'''
\set statement_timeout 'statement_timeout = ''200ms'''
\set nobody 'role = regress_ec_nobody'
INSERT INTO ec_cases (name, setting, stmt, expected) VALUES
-- idempotent_begin
('begin: key is null', NULL, $$SELECT idempotency.idempotent_begin(NULL)$$, '22004'),
('begin: scope is null', NULL, $$SELECT idempotency.idempotent_begin('ec-new', scope => NULL)$$, '22004'),
('begin: ttl is null', NULL, $$SELECT idempotency.idempotent_begin('ec-new', ttl => NULL)$$, '22004'),
('begin: defer_claim is null', NULL, $$SELECT idempotency.idempotent_begin('ec-new', defer_claim => NULL)$$, '22004'),
('begin: max_wait negative', NULL, $$SELECT idempotency.idempotent_begin('ec-new', max_wait => '-1 s')$$, '22023'),
('begin: wait is null', NULL, $$SELECT idempotency.idempotent_begin('ec-new', wait => NULL)$$, '22004'),
('begin: require_token is null', NULL, $$SELECT idempotency.idempotent_begin('ec-new', require_token => NULL)$$, '22004'),
('begin: ttl not positive', NULL, $$SELECT idempotency.idempotent_begin('ec-new', ttl => '0')$$, '22023'),
('begin: lease not positive', NULL, $$SELECT idempotency.idempotent_begin('ec-new', lease => '-1 minute')$$, '22023'),
('begin: lease of zero', NULL, $$SELECT idempotency.idempotent_begin('ec-new', ttl => '1 minute', lease => '0')$$, '22023'),
('begin: scope too long', NULL, $$SELECT idempotency.idempotent_begin('ec-new', scope => repeat('s', 256))$$, '22023'),
('begin: invalid key', NULL, $$SELECT idempotency.idempotent_begin(' ec-new')$$, '22P02'),
('begin: a different request', NULL, $$SELECT idempotency.idempotent_begin('ec-done', request => '{"n": 2}')$$, 'IK001'),
('begin: not a token', NULL, $$SELECT idempotency.idempotent_begin('ec-new', require_token => true)$$, 'IK005'),
('begin: token held, statement_timeout', :'statement_timeout', $$SELECT idempotency.idempotent_begin(token, 'ec', require_token => true) FROM ec_tokens WHERE name = 'held'$$, '57014'),
('begin: claim held, statement_timeout', :'statement_timeout', $$SELECT idempotency.idempotent_begin('ec-held')$$, '57014'),
('begin: not granted', :'nobody', $$SELECT idempotency.idempotent_begin('ec-new')$$, '42501'),
-- idempotent_begin(wait => false): the claim runs in a subtransaction
('begin nowait: ttl not positive', NULL, $$SELECT idempotency.idempotent_begin('ec-new', ttl => '0', wait => false)$$, '22023'),
('begin nowait: a different request', NULL, $$SELECT idempotency.idempotent_begin('ec-done', request => '{"n": 2}', wait => false)$$, 'IK001'),
('begin nowait: not a token', NULL, $$SELECT idempotency.idempotent_begin('ec-new', wait => false, require_token => true)$$, 'IK005'),
-- idempotent_finish
('finish: key is null', NULL, $$SELECT idempotency.idempotent_finish(NULL, '{}')$$, '22004'),
('finish: failed is null', NULL, $$SELECT idempotency.idempotent_finish('ec-live', '{}', failed => NULL)$$, '22004'),
('finish: scope too long', NULL, $$SELECT idempotency.idempotent_finish('ec-live', '{}', scope => repeat('s', 256))$$, '22023'),
('finish: no claim', NULL, $$SELECT idempotency.idempotent_finish('ec-never', '{}')$$, 'IK002'),
('finish: already finished', NULL, $$SELECT idempotency.idempotent_finish('ec-done', '{}')$$, 'IK003'),
('finish: stale attempt', NULL, $$SELECT idempotency.idempotent_finish('ec-live', '{}', attempt => (SELECT attempt - 1 FROM idempotency.my_records WHERE key::text = 'ec-live'))$$, 'IK004'),
('finish: response too large', 'idempotency.max_response_size = ''1kB''', $$SELECT idempotency.idempotent_finish('ec-live', jsonb_build_object('blob', repeat('x', 2000)))$$, '54000'),
('finish: headers not an object', NULL, $$SELECT idempotency.idempotent_finish('ec-live', '{}', headers => '["Location", "/x"]')$$, '22023'),
('finish: header value not a string', NULL, $$SELECT idempotency.idempotent_finish('ec-live', '{}', headers => '{"Retry-After": 5}')$$, '22023'),
('finish: headers too large', 'idempotency.max_response_size = ''1kB''', $$SELECT idempotency.idempotent_finish('ec-live', NULL, headers => jsonb_build_object('X-Pad', repeat('x', 2000)))$$, '54000'),
('finish: not granted', :'nobody', $$SELECT idempotency.idempotent_finish('ec-live', '{}')$$, '42501'),
-- idempotent_abandon
('abandon: key is null', NULL, $$SELECT idempotency.idempotent_abandon(NULL)$$, '22004'),
('abandon: scope too long', NULL, $$SELECT idempotency.idempotent_abandon('ec-live', scope => repeat('s', 256))$$, '22023'),
('abandon: no claim', NULL, $$SELECT idempotency.idempotent_abandon('ec-never')$$, 'IK002'),
('abandon: already finished', NULL, $$SELECT idempotency.idempotent_abandon('ec-done')$$, 'IK003'),
('abandon: stale attempt', NULL, $$SELECT idempotency.idempotent_abandon('ec-live', attempt => (SELECT attempt - 1 FROM idempotency.my_records WHERE key::text = 'ec-live'))$$, 'IK004'),
('abandon: not granted', :'nobody', $$SELECT idempotency.idempotent_abandon('ec-live')$$, '42501'),
-- the key type, make_key, grant_usage
('key: invalid text', NULL, $$SELECT 'ec bad '::idempotency.key$$, '22P02'),
('make_key: empty part', NULL, $$SELECT idempotency.make_key('order', '', 'pay')$$, '22023'),
('make_key: part with a colon', NULL, $$SELECT idempotency.make_key('order', 'a:b', 'pay')$$, '22023'),
('grant_usage: no such role', NULL, $$SELECT idempotency.grant_usage('regress_ec_no_such_role')$$, '42704'),
('grant_usage: not granted', :'nobody', $$SELECT idempotency.grant_usage('regress_ec_nobody')$$, '42501'),
-- inbox_receive
('inbox_receive: consumer is null', NULL, $$SELECT idempotency.inbox_receive(NULL, 'm')$$, '22004'),
('inbox_receive: message_id empty', NULL, $$SELECT idempotency.inbox_receive('ec', '')$$, '22023'),
('inbox_receive: ttl not positive', NULL, $$SELECT idempotency.inbox_receive('ec', 'm', ttl => '0')$$, '22023'),
('inbox_receive: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.inbox_receive('ec', 'held')$$, '55P03'),
('inbox_receive: held, statement_timeout', :'statement_timeout', $$SELECT idempotency.inbox_receive('ec', 'held')$$, '57014'),
('inbox_receive: not granted', :'nobody', $$SELECT idempotency.inbox_receive('ec', 'm')$$, '42501'),
-- inbox_receive_batch: a batch of new ids is tried in a subtransaction first
('inbox batch: message_ids is null', NULL, $$SELECT idempotency.inbox_receive_batch('ec', NULL)$$, '22004'),
('inbox batch: a null id', NULL, $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['m', NULL])$$, '22004'),
('inbox batch: an empty id', NULL, $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['m', ''])$$, '22023'),
('inbox batch: two dimensions', NULL, $$SELECT idempotency.inbox_receive_batch('ec', ARRAY[['a', 'b'], ['c', 'd']])$$, '2202E'),
('inbox batch: too many ids', NULL, $$SELECT idempotency.inbox_receive_batch('ec', array_fill('m'::text, ARRAY[10001]))$$, '54000'),
('inbox batch: ttl is null', NULL, $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['m'], ttl => NULL)$$, '22004'),
('inbox batch: new ids, held, lock_timeout', :'lock_timeout', $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['ec-new-1', 'held', 'ec-new-2'])$$, '55P03'),
('inbox batch: new ids, held, statement_timeout', :'statement_timeout', $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['ec-new-1', 'held', 'ec-new-2'])$$, '57014'),
('inbox batch: a seen id, held, lock_timeout', :'lock_timeout', $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['seen', 'held'])$$, '55P03'),
('inbox batch: a seen id, held, statement_timeout', :'statement_timeout', $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['seen', 'held'])$$, '57014'),
('inbox batch: not granted', :'nobody', $$SELECT idempotency.inbox_receive_batch('ec', ARRAY['m'])$$, '42501'),
-- tokens
('issue_token: scope is null', NULL, $$SELECT idempotency.issue_token(NULL)$$, '22004'),
('issue_token: ttl is null', NULL, $$SELECT idempotency.issue_token('ec', ttl => NULL)$$, '22004'),
('issue_token: ttl not positive', NULL, $$SELECT idempotency.issue_token('ec', ttl => '0')$$, '22023'),
('issue_token: scope too long', NULL, $$SELECT idempotency.issue_token(repeat('s', 256))$$, '22023'),
('issue_token: not granted', :'nobody', $$SELECT idempotency.issue_token('ec')$$, '42501'),
('consume_token: token is null', NULL, $$SELECT idempotency.consume_token(NULL, 'ec')$$, '22004'),
('consume_token: scope too long', NULL, $$SELECT idempotency.consume_token('tk_0', repeat('s', 256))$$, '22023'),
('consume_token: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.consume_token(token, 'ec') FROM ec_tokens WHERE name = 'held'$$, '55P03'),
-- the outbox: a second sender of a key waits for the first
('outbox_send: topic is null', NULL, $$SELECT idempotency.outbox_send(NULL, '{}')$$, '22004'),
('outbox_send: payload is null', NULL, $$SELECT idempotency.outbox_send('ec', NULL)$$, '22004'),
('outbox_send: ordering_key empty', NULL, $$SELECT idempotency.outbox_send('ec', '{}', '')$$, '22023'),
('outbox_send: headers not an object', NULL, $$SELECT idempotency.outbox_send('ec', '{}', headers => '1')$$, '22023'),
('outbox_send: message_id too long', NULL, $$SELECT idempotency.outbox_send('ec', '{}', message_id => repeat('m', 256))$$, '22023'),
('outbox_send: id already sent', NULL, $$SELECT idempotency.outbox_send('ec', '{}', 'ec', message_id => 'ec-sent')$$, '23505'),
('outbox_send: key held, lock_timeout', :'lock_timeout', $$SELECT idempotency.outbox_send('ec', '{}', 'ec-held')$$, '55P03'),
('outbox_send: key held, statement_timeout', :'statement_timeout', $$SELECT idempotency.outbox_send('ec', '{}', 'ec-held')$$, '57014'),
('outbox_send: id held, lock_timeout', :'lock_timeout', $$SELECT idempotency.outbox_send('ec', '{}', 'ec-held', message_id => 'ec-held-1')$$, '55P03'),
('outbox_send: not granted', :'nobody', $$SELECT idempotency.outbox_send('ec', '{}')$$, '42501'),
('outbox_send: logical, wal_level too low', 'idempotency.outbox_delivery = logical', $$SELECT idempotency.outbox_send('ec', '{}')$$, '55000'),
('outbox_fetch: batch_size not positive', NULL, $$SELECT * FROM idempotency.outbox_fetch(0)$$, '22023'),
('outbox_fetch: batch_size is null', NULL, $$SELECT * FROM idempotency.outbox_fetch(NULL)$$, '22004'),
('outbox_fetch: lease not positive', NULL, $$SELECT * FROM idempotency.outbox_fetch(lease => '-1 s')$$, '22023'),
('outbox_fetch: not granted', :'nobody', $$SELECT * FROM idempotency.outbox_fetch()$$, '42501'),
('outbox_ack: attempt is null', NULL, $$SELECT idempotency.outbox_ack(NULL, ARRAY['ec-sent'])$$, '22004'),
('outbox_ack: a null id', NULL, $$SELECT idempotency.outbox_ack(1, ARRAY['ec-sent', NULL])$$, '22004'),
('outbox_ack: two dimensions', NULL, $$SELECT idempotency.outbox_ack(1, ARRAY[['a'], ['b']])$$, '2202E'),
('outbox_ack: too many ids', NULL, $$SELECT idempotency.outbox_ack(1, array_fill('m'::text, ARRAY[10001]))$$, '54000'),
('outbox_ack: ttl not positive', NULL, $$SELECT idempotency.outbox_ack(1, ARRAY['ec-sent'], ttl => '0')$$, '22023'),
('outbox_ack: not held by the attempt', NULL, $$SELECT idempotency.outbox_ack(-1, ARRAY['ec-sent'])$$, 'IK004'),
('outbox_ack: not granted', :'nobody', $$SELECT idempotency.outbox_ack(1, ARRAY['ec-sent'])$$, '42501'),
-- key locks
('lock: key is null', NULL, $$SELECT idempotency.lock(NULL)$$, '22004'),
('lock: scope too long', NULL, $$SELECT idempotency.lock('ec-new', repeat('s', 256))$$, '22023'),
('lock: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.lock('ec-held')$$, '55P03'),
('lock: held, statement_timeout', :'statement_timeout', $$SELECT idempotency.lock('ec-held')$$, '57014'),
('try_lock: key is null', NULL, $$SELECT idempotency.try_lock(NULL)$$, '22004'),
('try_lock: scope too long', NULL, $$SELECT idempotency.try_lock('ec-new', repeat('s', 256))$$, '22023'),
-- cleanup, statistics
('cleanup: batch_size not positive', NULL, $$SELECT idempotency.cleanup(0)$$, '22023'),
('cleanup: not granted', :'nobody', $$SELECT idempotency.cleanup()$$, '42501'),
('stats_reset: not granted', :'nobody', $$SELECT idempotency.stats_reset()$$, '42501'),
-- state machines
('define_state_machine: empty name', NULL, $$SELECT idempotency.define_state_machine('', '{"a": ["b"]}')$$, '22023'),
('define_state_machine: not an object', NULL, $$SELECT idempotency.define_state_machine('ec_bad', '["a"]')$$, '22023'),
('define_state_machine: no initial state', NULL, $$SELECT idempotency.define_state_machine('ec_bad', '{"a": ["b"], "b": ["a"]}')$$, '22023'),
('define_state_machine: unknown initial state', NULL, $$SELECT idempotency.define_state_machine('ec_bad', '{"a": ["b"]}', '{c}')$$, '22023'),
('define_state_machine: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.define_state_machine('ec_held', '{"x": ["y"]}')$$, '55P03'),
('define_state_machine: not granted', :'nobody', $$SELECT idempotency.define_state_machine('ec_bad', '{"a": ["b"]}')$$, '42501'),
('drop_state_machine: no such machine', NULL, $$SELECT idempotency.drop_state_machine('ec_no_such_machine')$$, '42704'),
('drop_state_machine: in use', NULL, $$SELECT idempotency.drop_state_machine('ec_order')$$, '2BP01'),
('drop_state_machine: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.drop_state_machine('ec_held')$$, '55P03'),
-- the administrator's role tools (a token row is held)
('forget_role: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.forget_role(current_user)$$, '55P03'),
('rename_owner: held, lock_timeout', :'lock_timeout', $$SELECT idempotency.rename_owner(current_user, 'regress_ec_nobody')$$, '55P03'),
('transition_allowed: no such machine', NULL, $$SELECT idempotency.transition_allowed('ec_no_such_machine', 'a', 'b')$$, '42704'),
('state_machine_transitions: no such machine', NULL, $$SELECT * FROM idempotency.state_machine_transitions('ec_no_such_machine')$$, '42704'),
-- the check_transition trigger
('check_transition: not allowed', NULL, $$UPDATE ec_orders SET status = 'new' WHERE id = 1$$, 'IS001'),
('check_transition: not an initial state', NULL, $$INSERT INTO ec_orders VALUES (2, 'done')$$, 'IS001'),
('check_transition: unknown state', NULL, $$UPDATE ec_orders SET status = 'nonsense' WHERE id = 1$$, 'IS002'),
('check_transition: null state', NULL, $$UPDATE ec_orders SET status = NULL WHERE id = 1$$, '23502'),
('check_transition: machine gone', NULL, $$INSERT INTO ec_orphans VALUES (1, 'a')$$, '42704'),
('check_transition: column gone', NULL, $$INSERT INTO ec_nostate VALUES (1)$$, '42703'),
('check_transition: called directly', NULL, $$SELECT idempotency.check_transition()$$, '39P01'),
-- the record_transition trigger
('record_transition: column gone', NULL, $$INSERT INTO ec_nohistory VALUES (1)$$, '42703'),
('record_transition: no primary key', NULL, $$INSERT INTO ec_nopk VALUES (1, 'a')$$, '55000'),
-- the version_guard trigger
('version_guard: stale write', NULL, $$UPDATE ec_accounts SET version = 5 WHERE id = 1$$, 'IV001'),
('version_guard: null version', NULL, $$UPDATE ec_accounts SET version = NULL WHERE id = 1$$, '23502'),
('version_guard: out of range', NULL, $$UPDATE ec_small SET id = id$$, '22003'),
('version_guard: wrong column type', NULL, $$UPDATE ec_vtype SET id = id$$, '42804'),
('version_guard: column gone', NULL, $$UPDATE ec_vcolumn SET id = id$$, '42703');

-- case 4: run the statement inside an EXCEPTION block, then more work
CREATE FUNCTION ec_block(case_n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	c ec_cases;
	state text;
	context text;
	outcome text;
BEGIN
	SELECT * INTO STRICT c FROM ec_cases WHERE n = case_n;
	BEGIN
		INSERT INTO ec_log VALUES (case_n, 'in the block');
		EXECUTE c.stmt;
		outcome := 'no error';
	EXCEPTION WHEN OTHERS OR query_canceled THEN
		GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, context = PG_EXCEPTION_CONTEXT;
		outcome := state;
		IF state <> c.expected THEN
			outcome := outcome || ' (expected ' || c.expected || ')';
		END IF;
		IF context ~ 'idempotency\.(registry|inbox|tokens|state_history|state_machines)\M' THEN
			outcome := outcome || ', CONTEXT shows an internal statement';
		END IF;
	END;
	IF EXISTS (SELECT FROM ec_log WHERE n = case_n AND step = 'in the block') THEN
		outcome := outcome || ', the block''s INSERT was not rolled back';
	END IF;
	INSERT INTO ec_log VALUES (case_n, 'after the block');
	RETURN 'in a block: ' || outcome;
END $$;

-- the statement after: is the session idle, in a transaction of its own?
CREATE FUNCTION ec_session(case_n int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO ec_log VALUES (case_n, 'next statement');
	IF statement_timestamp() <> transaction_timestamp() THEN
		RETURN 'next statement: STILL INSIDE AN EARLIER TRANSACTION';
	END IF;
	RETURN 'next statement: idle';
END $$;

--
-- The driver: each case's statements, in order.  Errors show as their
-- SQLSTATE.
--
\set VERBOSITY sqlstate
\pset tuples_only on
\pset format unaligned
SELECT s.stmt
  FROM ec_cases AS c
 CROSS JOIN LATERAL (VALUES
	-- 1. autocommit, then a statement that must commit on its own
	(1, concat_ws('; ', 'SET LOCAL ' || c.setting, c.stmt)),
	(2, format('INSERT INTO ec_log VALUES (%s, %L)', c.n, 'autocommit')),
	-- 2. an explicit transaction, rolled back
	(3, format('BEGIN; INSERT INTO ec_log VALUES (%s, %L)', c.n, 'rolled back')),
	(4, concat_ws('; ', 'SET LOCAL ' || c.setting, c.stmt)),
	(5, 'ROLLBACK'),
	-- 3. under a savepoint: ROLLBACK TO, more work, COMMIT
	(6, format('BEGIN; INSERT INTO ec_log VALUES (%s, %L); SAVEPOINT ec', c.n, 'before the savepoint')),
	(7, concat_ws('; ', 'SET LOCAL ' || c.setting, c.stmt)),
	(8, format('ROLLBACK TO SAVEPOINT ec; INSERT INTO ec_log VALUES (%s, %L); COMMIT', c.n, 'after the savepoint')),
	-- 4. inside a PL/pgSQL EXCEPTION block, then more work
	(9, concat_ws('; ', 'SET LOCAL ' || c.setting, format('SELECT ec_block(%s)', c.n))),
	-- and then the next statement
	(10, format('SELECT ec_session(%s)', c.n))
 ) AS s(step, stmt)
 ORDER BY c.n, s.step
\gexec
\pset tuples_only off
\pset format aligned
\set VERBOSITY default

--
-- Reconnect: only what committed is left.  Every case must show exactly
-- the work that had to commit.
--
\c
SET search_path = public;
SELECT c.n, c.name, l.steps
  FROM ec_cases AS c
  LEFT JOIN LATERAL (SELECT string_agg(step, ', ' ORDER BY step) AS steps
					   FROM ec_log WHERE n = c.n) AS l ON true
 WHERE l.steps IS DISTINCT FROM
	   'after the block, after the savepoint, autocommit, before the savepoint, next statement'
 ORDER BY c.n;
SELECT step, count(*) AS cases FROM ec_log GROUP BY step ORDER BY step;
SELECT count(*) AS cases FROM ec_cases;

-- and the extension's tables are as they were before the cases
SELECT b.tab, b.n AS before, a.n AS after
  FROM (SELECT tab, count(*) AS n, string_agg(content, ',' ORDER BY content) AS all_rows
		  FROM ec_before GROUP BY tab) AS b
  FULL JOIN (SELECT tab, count(*) AS n, string_agg(content, ',' ORDER BY content) AS all_rows
			   FROM (SELECT 'registry' AS tab, r::text AS content FROM idempotency.registry AS r
					 UNION ALL SELECT 'inbox', i::text FROM idempotency.inbox AS i
					 UNION ALL SELECT 'tokens', t::text FROM idempotency.tokens AS t
					 UNION ALL SELECT 'outbox', o::text FROM idempotency.outbox AS o
					 UNION ALL SELECT 'state_machines', m::text FROM idempotency.state_machines AS m
					 UNION ALL SELECT 'state_history', count(*)::text FROM idempotency.state_history
					 UNION ALL SELECT 'ec_orders', o::text FROM ec_orders AS o
					 UNION ALL SELECT 'ec_accounts', a::text FROM ec_accounts AS a) AS now_rows
			  GROUP BY tab) AS a USING (tab)
 WHERE b.all_rows IS DISTINCT FROM a.all_rows
 ORDER BY 1;
SELECT count(*) AS prepared FROM pg_prepared_xacts WHERE gid LIKE 'ec\_%';

--
-- The first defect this file caught, as reported: IK001 from
-- begin(wait => false) in autocommit left the session in a transaction block
-- nobody opened, and the next ROLLBACK was FATAL.  Now ROLLBACK finds no
-- transaction, as after any other error in autocommit.
--
SELECT idempotency.idempotent_begin('ec-done', request => '{"n": 2}', wait => false, external => true);
ROLLBACK;

--
-- Errors from the statements the extension runs internally, in full: the
-- SQLSTATE, message and detail reach the caller, the internal statement does
-- not show in CONTEXT (a caller's own PL/pgSQL lines do).
--
SET lock_timeout = '10ms';
-- (a claim or token another transaction holds is a duplicate in progress: a
-- lock_timeout ends the wait with in_progress, not with an error)
SELECT outcome, status FROM idempotency.idempotent_begin('ec-held', external => true);
SELECT (idempotency.idempotent_begin(token, 'ec', require_token => true)).outcome FROM ec_tokens WHERE name = 'held';
SELECT idempotency.inbox_receive('ec', 'held');
SELECT idempotency.inbox_receive_batch('ec', ARRAY['ec-new-1', 'held', 'ec-new-2']);
SELECT idempotency.inbox_receive_batch('ec', ARRAY['seen', 'held']);
SELECT idempotency.consume_token(token, 'ec') FROM ec_tokens WHERE name = 'held';
SELECT idempotency.outbox_send('ec', '{}', 'ec-held');
SELECT idempotency.forget_role(current_user);
SELECT idempotency.rename_owner(current_user, 'regress_ec_nobody');
SELECT idempotency.drop_state_machine('ec_held');
CREATE FUNCTION ec_caller() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	PERFORM idempotency.inbox_receive('ec', 'held');
END $$;
SELECT ec_caller();
RESET lock_timeout;
BEGIN;
SET LOCAL statement_timeout = '200ms';
SELECT idempotency.inbox_receive_batch('ec', ARRAY['ec-new-1', 'held', 'ec-new-2']);
ROLLBACK;

--
-- Clean up
--
ROLLBACK PREPARED 'ec_claim';
ROLLBACK PREPARED 'ec_inbox';
ROLLBACK PREPARED 'ec_token';
ROLLBACK PREPARED 'ec_lock';
ROLLBACK PREPARED 'ec_machine';
DROP TABLE ec_orders, ec_accounts, ec_small, ec_orphans, ec_nostate, ec_nohistory, ec_nopk,
	ec_vtype, ec_vcolumn;
SELECT idempotency.drop_state_machine('ec_order');
SELECT idempotency.drop_state_machine('ec_held');
DELETE FROM idempotency.state_history WHERE table_name LIKE 'ec\_%';
DELETE FROM idempotency.registry WHERE key::text LIKE 'ec-%';
DELETE FROM idempotency.inbox WHERE consumer = 'ec';
DELETE FROM idempotency.tokens WHERE scope = 'ec';
DELETE FROM idempotency.outbox WHERE topic = 'ec';
DROP FUNCTION ec_block(int), ec_session(int), ec_caller();
DROP TABLE ec_log, ec_cases, ec_tokens, ec_before;
DROP ROLE regress_ec_nobody;
RESET search_path;
