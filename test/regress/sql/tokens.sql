--
-- One-time tokens, alone and with idempotent_begin(..., require_token).
-- Concurrency is in test/isolation/specs/tokens_race.spec.
--
SET search_path = public;

CREATE TEMP TABLE t AS SELECT idempotency.issue_token() AS tok;
SELECT tok::text ~ '^tk_[0-9a-f]{32}$' AS looks_right FROM t;
SELECT count(DISTINCT idempotency.issue_token()::text) AS all_different FROM generate_series(1, 100);
-- two in one row: each call's token is its own (and is the one stored)
CREATE TEMP TABLE two AS SELECT idempotency.issue_token()::text AS t1, idempotency.issue_token()::text AS t2;
SELECT t1 <> t2 AS differ, (SELECT count(*) FROM idempotency.tokens WHERE token::text IN (t1, t2)) AS both_stored
  FROM two;
DROP TABLE two;
SELECT idempotency.consume_token(tok) AS first, idempotency.consume_token(tok) AS second FROM t;
-- never issued, forged, other scope: false, the same answer as "used"
SELECT idempotency.consume_token('tk_00000000000000000000000000000000') AS forged;
SELECT idempotency.consume_token(idempotency.issue_token('checkout'), 'other-scope') AS wrong_scope;
-- expired
CREATE TEMP TABLE e AS SELECT idempotency.issue_token('checkout', ttl => '1 hour') AS tok;
UPDATE idempotency.tokens SET expires_at = now() - interval '1 second' WHERE token = (SELECT tok FROM e);
SELECT idempotency.consume_token(tok, 'checkout') AS expired FROM e;
-- the owner can see why
SELECT state, count(*) FROM idempotency.my_tokens GROUP BY state ORDER BY state;
-- a rolled back consumption leaves the token usable
CREATE TEMP TABLE r AS SELECT idempotency.issue_token() AS tok;
BEGIN;
SELECT idempotency.consume_token(tok) FROM r;
ROLLBACK;
SELECT idempotency.consume_token(tok) AS after_rollback FROM r;

-- bad input
SELECT idempotency.issue_token(NULL);
SELECT idempotency.issue_token('', ttl => '0');
SELECT idempotency.issue_token('', ttl => NULL);
SELECT idempotency.issue_token(repeat('s', 256));
SELECT idempotency.consume_token(NULL);
SELECT idempotency.consume_token('tk_x', NULL);

-- require_token: a key must be an issued token; used once, then replayed
CREATE TEMP TABLE c AS SELECT idempotency.issue_token('checkout') AS tok;
SELECT outcome FROM idempotency.idempotent_begin((SELECT tok FROM c), 'checkout', require_token => true, external => true);
SELECT idempotency.idempotent_finish((SELECT tok FROM c), '{"order": 1}', 'checkout', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = (SELECT tok FROM c) AND r.scope = 'checkout'));
SELECT outcome, response FROM idempotency.idempotent_begin((SELECT tok FROM c), 'checkout', require_token => true, external => true);
SELECT state FROM idempotency.my_tokens WHERE token = (SELECT tok FROM c);
SELECT idempotency.idempotent_begin('made-up-key', 'checkout', require_token => true);
DO $$
BEGIN
	PERFORM idempotency.idempotent_begin((SELECT tok FROM e), 'checkout', require_token => true);
EXCEPTION WHEN OTHERS THEN
	RAISE NOTICE 'expired token refused: %', SQLSTATE;
END $$;
SELECT idempotency.idempotent_begin('k', require_token => NULL);
SELECT count(*) AS no_claims_for_refused FROM idempotency.registry WHERE key IN ('made-up-key', (SELECT tok FROM e));

-- one role cannot consume another role's token
CREATE ROLE regress_token_a;
CREATE ROLE regress_token_b;
SELECT idempotency.grant_usage('regress_token_a');
SELECT idempotency.grant_usage('regress_token_b');
SET ROLE regress_token_a;
CREATE TEMP TABLE a_tok AS SELECT idempotency.issue_token() AS tok;
RESET ROLE;
GRANT SELECT ON a_tok TO regress_token_b;
SET ROLE regress_token_b;
SELECT idempotency.consume_token(tok) AS b_uses_a_token FROM a_tok;
SELECT count(*) AS b_sees FROM idempotency.my_tokens;
RESET ROLE;
SET ROLE regress_token_a;
SELECT idempotency.consume_token(tok) AS a_uses_it FROM a_tok;
RESET ROLE;

-- expired tokens go with the cleanup
UPDATE idempotency.tokens SET expires_at = now() - interval '1 second';
SELECT idempotency.cleanup() > 0 AS cleaned;
SELECT count(*) AS tokens_left FROM idempotency.tokens;

DROP TABLE a_tok;
TRUNCATE idempotency.registry;
DROP OWNED BY regress_token_a, regress_token_b;
DROP ROLE regress_token_a, regress_token_b;
RESET search_path;
