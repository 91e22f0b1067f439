--
-- What an HTTP idempotency layer needs: byte-exact replays (status code and
-- body), a claim-free lookup, expiry counted from completion, text keys, and
-- bounded waits that leave the caller's transaction usable.
--
SET search_path = public;

-- byte-exact replay: the body comes back byte for byte, whatever it holds
-- (JSON whose key order jsonb would change, bytes that are not text at all)
SELECT outcome FROM idempotency.idempotent_begin('h-bytes');
SELECT idempotency.idempotent_finish('h-bytes', NULL, status_code => 201,
		body => convert_to('{"z": 1, "a": 2, "a": 3}', 'UTF8') || '\x00ff0d0a'::bytea,
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-bytes' AND r.scope = ''));
SELECT outcome, status, response, status_code, body,
       body = convert_to('{"z": 1, "a": 2, "a": 3}', 'UTF8') || '\x00ff0d0a'::bytea AS same_bytes
  FROM idempotency.idempotent_begin('h-bytes');

-- response, status code and body together; a failure with its status code
SELECT outcome FROM idempotency.idempotent_begin('h-all');
SELECT idempotency.idempotent_finish('h-all', '{"id": 1}', status_code => 200, body => '\x7b7d', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-all' AND r.scope = ''));
SELECT outcome, response, status_code, body FROM idempotency.idempotent_begin('h-all');
SELECT outcome FROM idempotency.idempotent_begin('h-declined');
SELECT idempotency.idempotent_finish('h-declined', '{"error": "card_declined"}', failed => true, status_code => 402, attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-declined' AND r.scope = ''));
SELECT outcome, status, response, status_code FROM idempotency.idempotent_begin('h-declined');

-- no JSON response at all (a 204): allowed, replays as NULL
SELECT outcome FROM idempotency.idempotent_begin('h-204');
SELECT idempotency.idempotent_finish('h-204', NULL, status_code => 204, attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-204' AND r.scope = ''));
SELECT outcome, response IS NULL AS no_response, status_code, body IS NULL AS no_body
  FROM idempotency.idempotent_begin('h-204');

-- a status code must be an HTTP status code; the claim stays
SELECT outcome FROM idempotency.idempotent_begin('h-bad');
SELECT idempotency.idempotent_finish('h-bad', NULL, status_code => 99);
SELECT idempotency.idempotent_finish('h-bad', NULL, status_code => 600);
SELECT status FROM idempotency.my_records WHERE key = 'h-bad';

-- the size limit counts the body too
SET idempotency.max_response_size = '1kB';
SELECT idempotency.idempotent_finish('h-bad', '{"a": 1}', body => convert_to(repeat('x', 1100), 'UTF8'));
RESET idempotency.max_response_size;
SELECT status FROM idempotency.my_records WHERE key = 'h-bad';

-- expiry counted from completion: finish(ttl => ...) sets the record to
-- expire that long after the finish
SELECT outcome FROM idempotency.idempotent_begin('h-ttl', ttl => '1 hour');
SELECT idempotency.idempotent_finish('h-ttl', '{}', ttl => '7 days', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-ttl' AND r.scope = ''));
SELECT expires_at BETWEEN now() + interval '7 days' - interval '1 minute'
                      AND now() + interval '7 days' + interval '1 minute' AS seven_days
  FROM idempotency.my_records WHERE key = 'h-ttl';
SELECT outcome FROM idempotency.idempotent_begin('h-ttl2');
SELECT idempotency.idempotent_finish('h-ttl2', '{}', ttl => '0');
SELECT idempotency.idempotent_finish('h-ttl2', '{}', ttl => '-1 day');
SELECT status FROM idempotency.my_records WHERE key = 'h-ttl2';

-- lookup: read without claiming
SELECT * FROM idempotency.lookup('h-none');
SELECT outcome FROM idempotency.idempotent_begin('h-none');
SELECT found, status, response, status_code, body, attempt IS NOT NULL AS has_attempt,
       expires_at > now() AS live, lease_until > now() AS leased, request_matches
  FROM idempotency.lookup('h-all');
SELECT found, status, lease_until > now() AS leased
  FROM idempotency.lookup('h-bad');
-- whether a request matches the stored fingerprint (NULL: nothing to compare)
SELECT outcome FROM idempotency.idempotent_begin('h-req', request => '{"amount": 10}');
SELECT request_matches FROM idempotency.lookup('h-req', request => '{"amount": 10.0}');
SELECT request_matches FROM idempotency.lookup('h-req', request => '{"amount": 11}');
SELECT request_matches FROM idempotency.lookup('h-req');
SELECT request_matches FROM idempotency.lookup('h-all', request => '{}');
-- lookup claims nothing: after it, begin still executes
SELECT found FROM idempotency.lookup('h-fresh');
SELECT outcome FROM idempotency.idempotent_begin('h-fresh');
-- abandoned and expired records are not found
SELECT idempotency.idempotent_abandon('h-fresh', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-fresh' AND r.scope = ''));
SELECT found FROM idempotency.lookup('h-fresh');
UPDATE idempotency.registry SET expires_at = now() - interval '1 second' WHERE key = 'h-ttl';
SELECT found FROM idempotency.lookup('h-ttl');
-- scopes, and bad arguments
SELECT found FROM idempotency.lookup('h-all', scope => 'other');
SELECT * FROM idempotency.lookup(NULL);
SELECT * FROM idempotency.lookup('h-all', scope => NULL);
SELECT * FROM idempotency.lookup(' bad');

-- keys as text: a text or varchar value needs no cast, and key values pass
-- through their cast to text; the key's rules still apply
SELECT outcome FROM idempotency.idempotent_begin('h-text'::text);
SELECT outcome FROM idempotency.idempotent_begin('h-text'::varchar);
SELECT outcome FROM idempotency.idempotent_begin('h-text'::idempotency.key);
SELECT outcome FROM idempotency.idempotent_begin(idempotency.make_key('order', '42', 'pay'));
DO $$
DECLARE
	k text := 'h-plpgsql';
	b record;
BEGIN
	b := idempotency.idempotent_begin(k);
	PERFORM idempotency.idempotent_finish(k, '{"ok": true}', attempt => b.attempt);
	b := idempotency.idempotent_begin(k);
	RAISE NOTICE 'outcome %, response %', b.outcome, b.response;
END $$;
SELECT idempotency.idempotent_begin(E'bad\tkey'::text);
SELECT idempotency.idempotent_finish(repeat('x', 256)::text, '{}');
SELECT idempotency.consume_token('tk_never'::text);
BEGIN;
SELECT idempotency.lock('h-lock'::text), idempotency.try_lock('h-lock'::varchar);
COMMIT;
SELECT idempotency.lock(E'\x01'::text);

-- bounded waits without a concurrent holder answer at once; bad max_wait
SELECT outcome FROM idempotency.idempotent_begin('h-wait', max_wait => '50 ms');
SELECT outcome FROM idempotency.idempotent_begin('h-wait', max_wait => '0');
SELECT outcome FROM idempotency.idempotent_begin('h-wait', max_wait => '-1 s');

-- a short ttl gets a lease no longer than itself
SELECT outcome, lease_until = expires_at AS lease_is_ttl
  FROM idempotency.idempotent_begin('h-short', ttl => '30 seconds');

TRUNCATE idempotency.registry;
RESET search_path;
