--
-- Bad input to the registry functions: a specific SQLSTATE, a clear
-- message, and nothing changed.
--
SET search_path = public;
\set VERBOSITY default

-- errors that name attempt numbers (fencing tokens read from the clock)
-- are shown with those numbers masked
CREATE FUNCTION fenced_error(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	msg text;
	det text;
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
	RETURN regexp_replace(SQLSTATE || ': ' || msg || ' / ' || det, '[0-9]{6,}', 'N', 'g');
END $$;

-- a helper that shows the SQLSTATE of an error
CREATE FUNCTION sqlstate_of(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE sql;
	RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END $$;

-- NULL arguments
SELECT idempotency.idempotent_begin(NULL);
SELECT idempotency.idempotent_begin('k', scope => NULL);
SELECT idempotency.idempotent_begin('k', ttl => NULL);
-- a NULL lease is the default: the shorter of 5 minutes and ttl
SELECT outcome, lease_until = expires_at AS lease_is_ttl
  FROM idempotency.idempotent_begin('k-short', ttl => '30 seconds', lease => NULL);
SELECT outcome, lease_until BETWEEN now() + interval '299 seconds' AND now() + interval '301 seconds' AS lease_5min
  FROM idempotency.idempotent_begin('k-long', ttl => '1 hour');
SELECT idempotency.idempotent_begin('k', wait => NULL);
SELECT idempotency.idempotent_finish(NULL, '{}');
SELECT idempotency.idempotent_finish('k', '{}', scope => NULL);
SELECT idempotency.idempotent_finish('k', '{}', failed => NULL);
SELECT idempotency.idempotent_abandon(NULL);
SELECT idempotency.idempotent_abandon('k', scope => NULL);
SELECT sqlstate_of($$SELECT idempotency.idempotent_begin(NULL)$$);

-- bad keys never reach the function
SELECT idempotency.idempotent_begin('');
SELECT idempotency.idempotent_begin(' k');

-- ttl and lease must be positive; a lease longer than the ttl is clamped to it
SELECT idempotency.idempotent_begin('k', ttl => '0');
SELECT idempotency.idempotent_begin('k', ttl => '-1 hour');
SELECT idempotency.idempotent_begin('k', ttl => '1 month -40 days');
SELECT idempotency.idempotent_begin('k', lease => '0');
SELECT idempotency.idempotent_begin('k', lease => '-5 minutes');
SELECT outcome, lease_until = expires_at AS lease_is_ttl
  FROM idempotency.idempotent_begin('k-clamped', ttl => '1 minute', lease => '2 minutes');
SELECT idempotency.idempotent_begin('k', ttl => '1000000 years');
SELECT sqlstate_of($$SELECT idempotency.idempotent_begin('k', ttl => '0')$$);

-- scope length
SELECT idempotency.idempotent_begin('k', scope => repeat('s', 256));
SELECT outcome FROM idempotency.idempotent_begin('k-scope-max', scope => repeat('s', 255));

-- finish and abandon without a claim (IK002)
SELECT idempotency.idempotent_finish('never-claimed', '{}');
SELECT idempotency.idempotent_abandon('never-claimed');
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('never-claimed', '{}')$$);

-- finish twice, abandon after finish (IK003)
SELECT outcome FROM idempotency.idempotent_begin('k-done');
SELECT idempotency.idempotent_finish('k-done', '"first"');
SELECT idempotency.idempotent_finish('k-done', '"second"');
SELECT idempotency.idempotent_abandon('k-done');
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('k-done', '{}')$$);
SELECT response FROM idempotency.my_records WHERE key = 'k-done';

-- a stale attempt (IK004)
SELECT outcome, attempt AS stale FROM idempotency.idempotent_begin('k-stale') \gset
SELECT fenced_error($$SELECT idempotency.idempotent_finish('k-stale', '{}', attempt => $$ || :stale + 1 || ')');
SELECT fenced_error($$SELECT idempotency.idempotent_abandon('k-stale', attempt => $$ || :stale - 1 || ')');
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('k-stale', '{}', attempt => 7)$$);
SELECT status, attempt = :stale AS unchanged FROM idempotency.my_records WHERE key = 'k-stale';

-- a response over idempotency.max_response_size (54000); the claim stays
SET idempotency.max_response_size = '1kB';
SELECT idempotency.idempotent_finish('k-stale', jsonb_build_object('blob', repeat('x', 2000)));
SELECT sqlstate_of($$SELECT idempotency.idempotent_finish('k-stale', jsonb_build_object('blob', repeat('x', 2000)))$$);
SELECT status FROM idempotency.my_records WHERE key = 'k-stale';
RESET idempotency.max_response_size;
SHOW idempotency.max_response_size;
-- only a superuser may change the limit
CREATE ROLE regress_limit_user;
SET ROLE regress_limit_user;
SET idempotency.max_response_size = '1GB';
RESET ROLE;
DROP ROLE regress_limit_user;
SET idempotency.no_such_setting = 1;

-- a huge request is only fingerprinted, never stored
SELECT outcome FROM idempotency.idempotent_begin('k-huge-request', request => jsonb_build_object('blob', repeat('y', 5000000)));
SELECT fingerprint IS NOT NULL AS fingerprinted, octet_length(fingerprint) AS bytes
  FROM idempotency.registry WHERE key = 'k-huge-request';

-- nothing above left a half-written record
SELECT key, status FROM idempotency.my_records ORDER BY key;

TRUNCATE idempotency.registry;
DROP FUNCTION sqlstate_of(text);
DROP FUNCTION fenced_error(text);
RESET search_path;
