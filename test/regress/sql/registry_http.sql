--
-- What an HTTP idempotency layer needs: byte-exact replays (status code and
-- body), a claim-free lookup, expiry counted from completion, text keys, and
-- bounded waits that leave the caller's transaction usable.
--
SET search_path = public;

-- byte-exact replay: the body comes back byte for byte, whatever it holds
-- (JSON whose key order jsonb would change, bytes that are not text at all)
SELECT outcome FROM idempotency.idempotent_begin('h-bytes', external => true);
SELECT idempotency.idempotent_finish('h-bytes', NULL, status_code => 201,
		body => convert_to('{"z": 1, "a": 2, "a": 3}', 'UTF8') || '\x00ff0d0a'::bytea,
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-bytes' AND r.scope = ''));
SELECT outcome, status, response, status_code, body,
       body = convert_to('{"z": 1, "a": 2, "a": 3}', 'UTF8') || '\x00ff0d0a'::bytea AS same_bytes
  FROM idempotency.idempotent_begin('h-bytes', external => true);

-- response, status code and body together; a failure with its status code
SELECT outcome FROM idempotency.idempotent_begin('h-all', external => true);
SELECT idempotency.idempotent_finish('h-all', '{"id": 1}', status_code => 200, body => '\x7b7d', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-all' AND r.scope = ''));
SELECT outcome, response, status_code, body FROM idempotency.idempotent_begin('h-all', external => true);
SELECT outcome FROM idempotency.idempotent_begin('h-declined', external => true);
SELECT idempotency.idempotent_finish('h-declined', '{"error": "card_declined"}', failed => true, status_code => 402, attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-declined' AND r.scope = ''));
SELECT outcome, status, response, status_code FROM idempotency.idempotent_begin('h-declined', external => true);

-- no JSON response at all (a 204): allowed, replays as NULL
SELECT outcome FROM idempotency.idempotent_begin('h-204', external => true);
SELECT idempotency.idempotent_finish('h-204', NULL, status_code => 204, attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-204' AND r.scope = ''));
SELECT outcome, response IS NULL AS no_response, status_code, body IS NULL AS no_body
  FROM idempotency.idempotent_begin('h-204', external => true);

-- a status code must be an HTTP status code; the claim stays
SELECT outcome FROM idempotency.idempotent_begin('h-bad', external => true);
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
SELECT outcome FROM idempotency.idempotent_begin('h-ttl', ttl => '1 hour', external => true);
SELECT idempotency.idempotent_finish('h-ttl', '{}', ttl => '7 days', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-ttl' AND r.scope = ''));
SELECT expires_at BETWEEN now() + interval '7 days' - interval '1 minute'
                      AND now() + interval '7 days' + interval '1 minute' AS seven_days
  FROM idempotency.my_records WHERE key = 'h-ttl';
SELECT outcome FROM idempotency.idempotent_begin('h-ttl2', external => true);
SELECT idempotency.idempotent_finish('h-ttl2', '{}', ttl => '0');
SELECT idempotency.idempotent_finish('h-ttl2', '{}', ttl => '-1 day');
SELECT status FROM idempotency.my_records WHERE key = 'h-ttl2';

-- lookup: read without claiming
SELECT * FROM idempotency.lookup('h-none');
SELECT outcome FROM idempotency.idempotent_begin('h-none', external => true);
SELECT found, status, response, status_code, body, attempt IS NOT NULL AS has_attempt,
       expires_at > now() AS live, lease_until > now() AS leased, request_matches
  FROM idempotency.lookup('h-all');
SELECT found, status, lease_until > now() AS leased
  FROM idempotency.lookup('h-bad');
-- whether a request matches the stored fingerprint (NULL: nothing to compare)
SELECT outcome FROM idempotency.idempotent_begin('h-req', request => '{"amount": 10}', external => true);
SELECT request_matches FROM idempotency.lookup('h-req', request => '{"amount": 10.0}');
SELECT request_matches FROM idempotency.lookup('h-req', request => '{"amount": 11}');
SELECT request_matches FROM idempotency.lookup('h-req');
SELECT request_matches FROM idempotency.lookup('h-all', request => '{}');
-- a read-only transaction (as on a hot standby): begin reads first, so a
-- finished key replays and a claimed one answers in_progress, whatever this
-- backend's recent begins found (those below found nothing); claiming a
-- key is a write (25006), as is any begin with require_token
BEGIN;
SELECT count(*) FROM generate_series(1, 16) AS i,
	   idempotency.idempotent_begin('h-ro-new-' || i, external => true);
ROLLBACK;
BEGIN READ ONLY;
SELECT outcome, status, status_code FROM idempotency.idempotent_begin('h-all', external => true);
SELECT outcome, status, status_code FROM idempotency.idempotent_begin('h-all', max_wait => '0', external => true);
SELECT outcome, status FROM idempotency.idempotent_begin('h-bad', wait => false, external => true);
SELECT found, status FROM idempotency.lookup('h-all');
SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('h-ro-new', external => true);
ROLLBACK TO SAVEPOINT s;
SELECT outcome FROM idempotency.idempotent_begin('h-all', require_token => true, external => true);
ROLLBACK;
SELECT found FROM idempotency.lookup('h-ro-new');
-- lookup claims nothing: after it, begin still executes
SELECT found FROM idempotency.lookup('h-fresh');
SELECT outcome FROM idempotency.idempotent_begin('h-fresh', external => true);
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
SELECT outcome FROM idempotency.idempotent_begin('h-text'::text, external => true);
SELECT outcome FROM idempotency.idempotent_begin('h-text'::varchar, external => true);
SELECT outcome FROM idempotency.idempotent_begin('h-text'::idempotency.key, external => true);
SELECT outcome FROM idempotency.idempotent_begin(idempotency.make_key('order', '42', 'pay'), external => true);
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
SELECT outcome FROM idempotency.idempotent_begin('h-wait', max_wait => '50 ms', external => true);
SELECT outcome FROM idempotency.idempotent_begin('h-wait', max_wait => '0', external => true);
SELECT outcome FROM idempotency.idempotent_begin('h-wait', max_wait => '-1 s');

-- a short ttl gets a lease no longer than itself
SELECT outcome, lease_until = expires_at AS lease_is_ttl
  FROM idempotency.idempotent_begin('h-short', ttl => '30 seconds', external => true);

-- response headers: stored with the status code and body, replayed by
-- begin and shown by lookup and my_records
SELECT outcome, headers IS NULL AS no_headers FROM idempotency.idempotent_begin('h-hdr', external => true);
SELECT idempotency.idempotent_finish('h-hdr', NULL, status_code => 201, body => '\x7b7d',
		headers => '{"Location": "/charges/1", "Content-Type": "application/json"}',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr' AND r.scope = ''));
SELECT outcome, status_code, body, headers, retry_after FROM idempotency.idempotent_begin('h-hdr', external => true);
SELECT found, headers FROM idempotency.lookup('h-hdr');
SELECT headers FROM idempotency.my_records WHERE key = 'h-hdr';
-- the same finish again (its acknowledgement lost) is no error: headers
-- are compared as jsonb, so their order does not matter; other headers,
-- or none, are a different answer
SELECT idempotency.idempotent_finish('h-hdr', NULL, status_code => 201, body => '\x7b7d',
		headers => '{"Content-Type": "application/json", "Location": "/charges/1"}',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr' AND r.scope = ''));
SELECT idempotency.idempotent_finish('h-hdr', NULL, status_code => 201, body => '\x7b7d',
		headers => '{"Location": "/charges/2", "Content-Type": "application/json"}',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr' AND r.scope = ''));
SELECT idempotency.idempotent_finish('h-hdr', NULL, status_code => 201, body => '\x7b7d',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr' AND r.scope = ''));
-- an empty object is headers too: it is not the same answer as none
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-empty', external => true);
SELECT idempotency.idempotent_finish('h-hdr-empty', NULL, status_code => 204, headers => '{}',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-empty' AND r.scope = ''));
SELECT outcome, headers FROM idempotency.idempotent_begin('h-hdr-empty', external => true);
SELECT idempotency.idempotent_finish('h-hdr-empty', NULL, status_code => 204,
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-empty' AND r.scope = ''));
-- a key claimed again after an abandon starts without headers
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-abandon', external => true);
SELECT idempotency.idempotent_abandon('h-hdr-abandon', attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-abandon' AND r.scope = ''));
SELECT outcome, headers IS NULL AS no_headers FROM idempotency.idempotent_begin('h-hdr-abandon', external => true);

-- several values of one header: an array of strings, one header line
-- each, kept in its order (a jsonb object keeps neither a repeated key nor
-- the order of its keys)
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-list', external => true);
SELECT idempotency.idempotent_finish('h-hdr-list', NULL, status_code => 201,
		headers => '{"Set-Cookie": ["b=2; Path=/", "a=1; Path=/"], "Location": "/charges/3"}',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-list' AND r.scope = ''));
SELECT outcome, headers, headers -> 'Set-Cookie' ->> 0 AS first_cookie
  FROM idempotency.idempotent_begin('h-hdr-list', external => true);
-- headers in a given order, names repeated: an array of [name, value]
-- pairs, stored as given and replayed in its order by begin, lookup and
-- my_records
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-pairs', external => true);
SELECT idempotency.idempotent_finish('h-hdr-pairs', NULL, status_code => 201,
		headers => '[["Set-Cookie", "b=2"], ["Location", "/charges/4"], ["Set-Cookie", "a=1"], ["set-cookie", "c=3"]]',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-pairs' AND r.scope = ''));
SELECT h.n, h.pair ->> 0 AS name, h.pair ->> 1 AS value
  FROM idempotency.idempotent_begin('h-hdr-pairs', external => true) AS b,
       jsonb_array_elements(b.headers) WITH ORDINALITY AS h(pair, n)
 ORDER BY h.n;
SELECT found, headers FROM idempotency.lookup('h-hdr-pairs');
SELECT headers FROM idempotency.my_records WHERE key = 'h-hdr-pairs';
-- the order is part of the answer: the same pairs again are the same
-- finish; in another order, another answer
SELECT idempotency.idempotent_finish('h-hdr-pairs', NULL, status_code => 201,
		headers => '[["Set-Cookie", "b=2"], ["Location", "/charges/4"], ["Set-Cookie", "a=1"], ["set-cookie", "c=3"]]',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-pairs' AND r.scope = ''));
SELECT idempotency.idempotent_finish('h-hdr-pairs', NULL, status_code => 201,
		headers => '[["Set-Cookie", "a=1"], ["Location", "/charges/4"], ["Set-Cookie", "b=2"], ["set-cookie", "c=3"]]',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-pairs' AND r.scope = ''));
-- an empty array is no header lines, as {} is
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-nopairs', external => true);
SELECT idempotency.idempotent_finish('h-hdr-nopairs', NULL, status_code => 204, headers => '[]',
		attempt => (SELECT r.attempt FROM idempotency.my_records AS r WHERE r.key = 'h-hdr-nopairs' AND r.scope = ''));
SELECT outcome, headers FROM idempotency.idempotent_begin('h-hdr-nopairs', external => true);

-- headers must be one of those forms, with HTTP field names and values
-- without line breaks, and count in the size limit: refused in autocommit
-- (the claim stays) ...
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-bad', external => true);
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '"Location: /x"');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => 'null');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '{"Location": "/x", "Retry-After": 5}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '{"Vary": {"Accept": true}}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '{"Set-Cookie": []}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '{"Set-Cookie": ["a=1", null]}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '{"Set Cookie": "a=1"}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '{"": "a=1"}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => E'{"Location": "/x\\r\\nSet-Cookie: evil=1"}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => E'{"Set-Cookie": ["a=1", "b=\\u0007"]}');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '["Location", "/x"]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '[["Location", "/x"], {"Location": "/y"}]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '[["Location"]]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '[["Set-Cookie", "a=1", "b=2"]]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '[[null, "/x"]]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '[["Set-Cookie", ["a=1", "b=2"]]]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => '[["Location:", "/x"]]');
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => E'[["Location", "/x\\n"]]');
SET idempotency.max_response_size = '1kB';
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, headers => jsonb_build_object('X-Pad', repeat('x', 1100)));
-- ... the headers and the body together
SELECT idempotency.idempotent_finish('h-hdr-bad', NULL, body => convert_to(repeat('x', 600), 'UTF8'),
		headers => jsonb_build_object('X-Pad', repeat('x', 500)));
RESET idempotency.max_response_size;
SELECT status FROM idempotency.my_records WHERE key = 'h-hdr-bad';
-- ... in a transaction, which the error aborts (nothing of it is kept) ...
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-tx');
SELECT idempotency.idempotent_finish('h-hdr-tx', NULL, headers => '[[]]');
SELECT 1;
ROLLBACK;
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-tx');
SELECT idempotency.idempotent_finish('h-hdr-tx', NULL, headers => '{"Location": null}');
ROLLBACK;
BEGIN;
SET LOCAL idempotency.max_response_size = '1kB';
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-tx');
SELECT idempotency.idempotent_finish('h-hdr-tx', NULL, headers => jsonb_build_object('X-Pad', repeat('x', 1100)));
ROLLBACK;
SELECT count(*) FROM idempotency.my_records WHERE key = 'h-hdr-tx';
-- ... under a savepoint, after which the claim is finished as usual ...
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('h-hdr-sp');
SAVEPOINT s;
SELECT idempotency.idempotent_finish('h-hdr-sp', NULL, headers => '7');
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.idempotent_finish('h-hdr-sp', NULL, headers => '{"Location": true}');
ROLLBACK TO SAVEPOINT s;
SET LOCAL idempotency.max_response_size = '1kB';
SELECT idempotency.idempotent_finish('h-hdr-sp', NULL, headers => jsonb_build_object('X-Pad', repeat('x', 1100)));
ROLLBACK TO SAVEPOINT s;
SELECT idempotency.idempotent_finish('h-hdr-sp', NULL, status_code => 201, headers => '{"Location": "/sp"}');
COMMIT;
SELECT outcome, status_code, headers FROM idempotency.idempotent_begin('h-hdr-sp');
-- ... and in a PL/pgSQL EXCEPTION block
DO $$
DECLARE
	b record;
	bad jsonb[] := ARRAY['[["Location"]]', '{"Location": 1}', jsonb_build_object('X-Pad', repeat('x', 1100))];
BEGIN
	PERFORM set_config('idempotency.max_response_size', '1kB', true);
	b := idempotency.idempotent_begin('h-hdr-plpgsql');
	FOR i IN 1 .. array_length(bad, 1) LOOP
		BEGIN
			PERFORM idempotency.idempotent_finish('h-hdr-plpgsql', NULL, headers => bad[i]);
		EXCEPTION WHEN OTHERS THEN
			RAISE NOTICE 'headers %: %', i, SQLSTATE;
		END;
	END LOOP;
	PERFORM idempotency.idempotent_finish('h-hdr-plpgsql', NULL, status_code => 200,
										  headers => '{"Content-Type": "text/plain"}');
	b := idempotency.idempotent_begin('h-hdr-plpgsql');
	RAISE NOTICE 'outcome %, headers %', b.outcome, b.headers;
END $$;
SHOW idempotency.max_response_size;

-- retry_after: an in_progress answer says how many whole seconds until the
-- holder's lease ends (at least 1); execute and replay answers carry none
SELECT outcome, retry_after IS NULL AS no_retry_after
  FROM idempotency.idempotent_begin('h-retry', lease => '10 minutes', external => true);
SELECT outcome, retry_after BETWEEN 590 AND 600 AS about_ten_minutes
  FROM idempotency.idempotent_begin('h-retry', lease => '10 minutes', external => true);
SELECT outcome, retry_after IS NULL AS no_retry_after FROM idempotency.idempotent_begin('h-hdr', external => true);
-- this transaction's own claim
BEGIN;
SELECT outcome FROM idempotency.idempotent_begin('h-retry-own', lease => '1 minute');
SELECT outcome, retry_after BETWEEN 50 AND 60 AS about_a_minute
  FROM idempotency.idempotent_begin('h-retry-own', lease => '1 minute');
ROLLBACK;

TRUNCATE idempotency.registry;
RESET search_path;
