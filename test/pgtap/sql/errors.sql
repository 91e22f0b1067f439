-- pgTAP: every SQLSTATE a caller can get, as an HTTP layer would map it
\set ECHO none
\pset format unaligned
\pset tuples_only true
\pset pager off
SET client_min_messages = warning;
BEGIN;
SELECT plan(27);

-- 400: bad input
SELECT throws_ok($$SELECT ''::idempotency.key$$, '22P02', NULL, 'empty key: 22P02');
SELECT throws_ok($$SELECT repeat('k', 256)::idempotency.key$$, '22P02', NULL, 'key too long: 22P02');
SELECT throws_ok($$SELECT E'a\x01b'::idempotency.key$$, '22P02', NULL, 'control character: 22P02');
SELECT throws_ok($$SELECT ' k'::idempotency.key$$, '22P02', NULL, 'leading space: 22P02');
SELECT throws_ok($$SELECT idempotency.idempotent_begin(NULL)$$, '22004', NULL, 'NULL key: 22004');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k', ttl => NULL)$$, '22004', NULL, 'NULL ttl: 22004');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k', ttl => '0')$$, '22023', NULL, 'zero ttl: 22023');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k', lease => '-1 s')$$, '22023', NULL, 'negative lease: 22023');
SELECT is((SELECT lease_until = expires_at FROM idempotency.idempotent_begin('k-clamped', ttl => '1 s', lease => '1 min')), true, 'lease longer than ttl: clamped to ttl');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k', scope => repeat('s', 256))$$, '22023', NULL, 'scope too long: 22023');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k', defer_claim => true, external => true)$$, '22023', NULL, 'deferred claim for work outside the database: 22023');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k', external => NULL)$$, '22004', NULL, 'NULL external: 22004');
SELECT throws_ok($$SELECT idempotency.make_key('a', 'b:c', 'd')$$, '22023', NULL, 'make_key part with a colon: 22023');
SELECT throws_ok($$SELECT idempotency.make_key('', 'b', 'd')$$, '22023', NULL, 'make_key empty part: 22023');
SELECT throws_ok($$SELECT idempotency.idempotent_finish('k', NULL, headers => '"Location: /x"')$$, '22023', NULL, 'headers neither an object nor an array: 22023');
SELECT throws_ok($$SELECT idempotency.idempotent_finish('k', NULL, headers => '{"Retry-After": 5}')$$, '22023', NULL, 'header value not a string: 22023');

-- 413: response too large
SELECT lives_ok($$SELECT idempotency.idempotent_begin('big')$$, 'claim for the large response');
SELECT throws_ok($$SET LOCAL idempotency.max_response_size = 1; SELECT idempotency.idempotent_finish('big', jsonb_build_object('x', repeat('x', 2000)))$$,
	'54000', NULL, 'response over the limit: 54000');
SELECT throws_ok($$SET LOCAL idempotency.max_response_size = 1; SELECT idempotency.idempotent_finish('big', NULL, headers => jsonb_build_object('X-Pad', repeat('x', 2000)))$$,
	'54000', NULL, 'headers over the limit: 54000');

-- 422: the key was used for another request
SELECT lives_ok($$SELECT idempotency.idempotent_begin('used', request => '{"a": 1}')$$, 'claim with a request');
SELECT throws_ok($$SELECT idempotency.idempotent_begin('used', request => '{"a": 2}')$$, 'IK001', NULL, 'different request: IK001');

-- 409: state conflicts
SELECT throws_ok($$SELECT idempotency.idempotent_finish('nothing', '{}')$$, 'IK002', NULL, 'finish without claim: IK002');
SELECT throws_ok($$SELECT idempotency.idempotent_abandon('nothing')$$, 'IK002', NULL, 'abandon without claim: IK002');
SELECT lives_ok($$SELECT idempotency.idempotent_finish('used', '{}')$$, 'finish once');
SELECT throws_ok($$SELECT idempotency.idempotent_finish('used', '{}')$$, 'IK003', NULL, 'finish twice: IK003');
SELECT throws_ok($$SELECT idempotency.idempotent_finish('big', '{}', attempt => 2)$$, 'IK004', NULL, 'stale attempt: IK004');

-- 403: no grant
CREATE ROLE regress_nogrant;
SET ROLE regress_nogrant;
SELECT throws_ok($$SELECT idempotency.idempotent_begin('k')$$, '42501', NULL, 'not granted: 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
